// Devices, their caching allocators, and Stream/Event.
// cpu: aligned host memory. emu: host memory posing as device memory (the
// CUDA-on-CPU emulator runs kernels on it). cuda: cudaMalloc, present only in
// builds with ENGINE_CUDA; asking for it elsewhere is an error, not a crash.
// Each device has one caching allocator: freed blocks go to a free list keyed
// by their rounded size and are reused, as PyTorch's allocator does, so a
// training step allocates from the system only on its first iteration.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace eng {

enum class DeviceType : uint8_t { cpu, cuda, emu };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string str() const;                    // "cpu", "cuda:0", "emu"
  static Device parse(const std::string& s);  // "cpu" | "emu" | "cuda" | "cuda:N"
};
inline const Device kCPU{DeviceType::cpu, 0};

bool cuda_built();      // compiled with the CUDA toolkit
bool cuda_available();  // a GPU answers at run time
Device device_auto();   // cuda when a GPU answers, else cpu

struct MemoryStats {
  size_t current_bytes = 0;  // bytes held by live tensors
  size_t peak_bytes = 0;     // high-water mark of current_bytes
  size_t cached_bytes = 0;   // bytes held in free lists, ready for reuse
  size_t system_allocs = 0;  // how many times the system allocator was called
};

class CachingAllocator {
 public:
  // pinned_host: page-locked host memory (cudaMallocHost) instead of dev's.
  explicit CachingAllocator(Device dev, bool pinned_host = false) : dev_(dev), pinned_(pinned_host) {}
  ~CachingAllocator();
  void* allocate(size_t bytes);
  void release(void* ptr, size_t bytes);
  void empty_cache();  // return every cached block to the system
  MemoryStats stats() const;
  void reset_peak();
  // emu only: the bytes from `p` to the end of the live block holding it, as
  // requested by allocate() (not rounded), or 0 when `p` is in no live block.
  // The NCCL look-alike (comm/nccl_emu) checks every buffer with it, so a
  // count in bytes instead of elements is caught as it would corrupt memory.
  size_t extent_from(const void* p) const;

  // Private pools, for CUDA graphs (engine/graph.h). Between begin_pool() and
  // end_pool() every allocation comes from a pool of its own, and its blocks
  // return to that pool when freed, whenever that is: they are never handed
  // to tensors allocated outside the graph, whose replays write them.
  // close_pool() (the graph is gone) gives the pool's blocks back.
  int begin_pool();
  void end_pool();
  void close_pool(int pool);

 private:
  static size_t round_size(size_t bytes);
  void* system_alloc(size_t bytes);
  void system_free(void* ptr, size_t bytes);  // bytes: as allocated (rounded)
  bool mapped(size_t bytes) const;            // a block system_alloc maps itself (mmap)
  Device dev_;
  bool pinned_;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // rounded size -> cached block
  MemoryStats stats_;
  int active_pool_ = 0;  // 0: the shared cache
  int next_pool_ = 1;
  std::map<int, std::multimap<size_t, void*>> pool_free_;  // open pools' cached blocks
  std::map<void*, int> pool_of_;                           // live or cached blocks of open pools
  std::map<const char*, size_t> live_;                     // emu: live block -> requested bytes
};

CachingAllocator& allocator_for(Device dev);
// Page-locked host memory (CUDA builds with a GPU), for truly asynchronous,
// capturable copies (engine/graph.h host_staging).
CachingAllocator& pinned_host_allocator();

// Copies bytes between any two devices (memcpy for cpu/emu, cudaMemcpy for cuda).
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
// Called with the bytes of every synchronous emu -> cpu copy once it is done
// (null: none, the default). The test harness hashes them to check that the
// emulator's schedules give the same results bit for bit (tests/main.cpp).
using ReadbackObserver = void (*)(const void* bytes, size_t n);
void set_emu_readback_observer(ReadbackObserver observer);

// Streams order work on a device. On cpu and emu every op runs to completion
// before it returns, so a stream is an ordered no-op and an event is always
// complete; on cuda they wrap cudaStream_t / cudaEvent_t (later issues).
class Stream {
 public:
  explicit Stream(Device dev = kCPU) : dev_(dev) {}
  Device device() const { return dev_; }
  void synchronize() const {}
  void* native() const { return native_; }

 private:
  Device dev_;
  void* native_ = nullptr;
};

class Event {
 public:
  void record(const Stream&) { recorded_ = true; }
  void wait(const Stream&) const {}
  bool query() const { return true; }
  void synchronize() const {}
  bool recorded() const { return recorded_; }

 private:
  bool recorded_ = false;
};

}  // namespace eng
