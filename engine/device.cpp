// Device parsing, the caching allocator, and cross-device copies.
#include "engine/device.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "engine/cuda_runtime.h"
#include "engine/graph.h"
#include "kernels/emu/count_only.h"

namespace eng {

std::string Device::str() const {
  switch (type) {
    case DeviceType::cpu:
      return "cpu";
    case DeviceType::emu:
      return "emu";
    case DeviceType::cuda:
      return cat("cuda:", index);
  }
  return "?";
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return {DeviceType::cpu, 0};
  if (s == "emu") return {DeviceType::emu, 0};
  if (s == "cuda") return {DeviceType::cuda, 0};
  if (s.rfind("cuda:", 0) == 0) {
    char* end = nullptr;
    const long idx = std::strtol(s.c_str() + 5, &end, 10);
    ENGINE_CHECK(end && *end == '\0' && idx >= 0, "bad device '", s, "'");
    return {DeviceType::cuda, int(idx)};
  }
  if (s == "auto") return device_auto();
  ENGINE_USER_FAIL("unknown device '", s, "' (expected cpu, cuda, cuda:N, emu or auto)");
}

bool cuda_built() { return cudart::built(); }
bool cuda_available() { return cudart::device_count() > 0; }
Device device_auto() { return cuda_available() ? Device{DeviceType::cuda, 0} : kCPU; }

CachingAllocator::~CachingAllocator() { empty_cache(); }

size_t CachingAllocator::round_size(size_t bytes) {
  // 512-byte granularity keeps 128-bit vector loads aligned and limits the
  // number of distinct free-list sizes without wasting much on small tensors.
  if (bytes == 0) return 512;
  return (bytes + 511) / 512 * 512;
}

// The cpu's blocks of 1 MiB and more are mapped and unmapped by the
// allocator itself. From malloc, glibc's mmap threshold rises with each
// large free, blocks under it then come from the heap, where a freed block
// stays mapped and the free space fragments: under ulimit -v the retry
// after emptying the cache below failed with much of the limit unused.
bool CachingAllocator::mapped(size_t bytes) const {
  return dev_.type == DeviceType::cpu && !pinned_ && bytes >= (size_t(1) << 20);
}

void* CachingAllocator::system_alloc(size_t bytes) {
  ++stats_.system_allocs;
  if (pinned_) return cudart::malloc_host(bytes);
  auto attempt = [&]() -> void* {
    if (dev_.type == DeviceType::cuda) return cudart::try_malloc_device(bytes, dev_.index);
    if (!mapped(bytes)) return std::aligned_alloc(64, bytes);
    void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? nullptr : m;
  };
  void* p = attempt();
  if (!p && !free_.empty()) {
    // The cached blocks are of other sizes: give them back and try once more.
    for (auto& [n, q] : free_) system_free(q, n);
    free_.clear();
    stats_.cached_bytes = 0;
    p = attempt();
  }
  auto mib = [](size_t b) { return cat(double(b) / 1048576.0, " MiB"); };
  // The user's batch, not the engine, asked for too much: a UserError, said without a source location.
  ENGINE_USER_CHECK(p, "out of memory on ", dev_.str(), ": cannot allocate ", mib(bytes), " more (",
                    mib(stats_.current_bytes), " held by live tensors, peak ", mib(stats_.peak_bytes),
                    "): a smaller batch_size needs less");
  return p;
}

void CachingAllocator::system_free(void* ptr, size_t bytes) {
  if (pinned_)
    cudart::free_host(ptr);
  else if (dev_.type == DeviceType::cuda)
    cudart::free_device(ptr);
  else if (mapped(bytes))
    ::munmap(ptr, bytes);
  else
    std::free(ptr);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t n = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto& cache = active_pool_ ? pool_free_[active_pool_] : free_;
  auto it = cache.find(n);
  if (it != cache.end()) {
    p = it->second;
    cache.erase(it);
    stats_.cached_bytes -= n;
  } else {
    p = system_alloc(n);
    if (active_pool_) pool_of_[p] = active_pool_;
  }
  stats_.current_bytes += n;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  // emu: fresh or reused, a block starts as 0xFF bytes (NaN in every float
  // type, -1 as an int), as the emulator poisons shared memory: a kernel that
  // forgets to write part of its output leaves NaNs a test sees, instead of
  // a previous tensor's plausible values. (cudaMalloc gives no such promise
  // either way; cpu memory stays as is: its kernels are the reference.) Not
  // in count-only mode, where no kernel runs: untouched, a block costs no
  // page (GPT-2 124M's step would touch tens of GB).
  if (dev_.type == DeviceType::emu) {
    if (!emu::count_only()) std::memset(p, 0xFF, n);
    live_[static_cast<const char*>(p)] = bytes;
  }
  return p;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  const size_t n = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (dev_.type == DeviceType::emu) live_.erase(static_cast<const char*>(ptr));
  auto it = pool_of_.find(ptr);
  (it != pool_of_.end() ? pool_free_[it->second] : free_).emplace(n, ptr);
  stats_.current_bytes -= n;
  stats_.cached_bytes += n;
}

int CachingAllocator::begin_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  ENGINE_CHECK(active_pool_ == 0, "allocator ", dev_.str(), ": private pools do not nest");
  active_pool_ = next_pool_++;
  pool_free_[active_pool_];
  return active_pool_;
}

void CachingAllocator::end_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  active_pool_ = 0;
}

void CachingAllocator::close_pool(int pool) {
  std::lock_guard<std::mutex> lock(mu_);
  auto f = pool_free_.find(pool);
  if (f != pool_free_.end()) {
    free_.insert(f->second.begin(), f->second.end());
    pool_free_.erase(f);
  }
  for (auto it = pool_of_.begin(); it != pool_of_.end();)  // live blocks return to the shared cache when freed
    it = it->second == pool ? pool_of_.erase(it) : std::next(it);
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, p] : free_) system_free(p, n);  // open pools keep theirs: their graphs still use them
  free_.clear();
  stats_.cached_bytes = 0;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t CachingAllocator::extent_from(const void* p) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.upper_bound(c);  // the first block starting after p
  if (it == live_.begin()) return 0;
  --it;
  return c < it->first + it->second ? size_t(it->first + it->second - c) : 0;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.current_bytes;
}

CachingAllocator& allocator_for(Device dev) {
  // One allocator per device, created on first use and kept for the process:
  // tensors freed during static destruction must still find their allocator.
  static std::mutex mu;
  static auto* table = new std::map<std::pair<int, int>, std::unique_ptr<CachingAllocator>>();
  std::lock_guard<std::mutex> lock(mu);
  if (dev.type == DeviceType::cuda) {
    ENGINE_CHECK(cuda_built(), "device ", dev.str(), " requested but this build has no CUDA (ENGINE_CUDA=OFF)");
    ENGINE_CHECK(dev.index < cudart::device_count(), "device ", dev.str(), " requested but ", cudart::device_count(),
                 " CUDA device(s) answer");
  }
  auto& slot = (*table)[{int(dev.type), dev.index}];
  if (!slot) slot = std::make_unique<CachingAllocator>(dev);
  return *slot;
}

CachingAllocator& pinned_host_allocator() {
  static auto* a = new CachingAllocator(kCPU, true);  // kept for the process, like the device allocators
  return *a;
}

namespace {
ReadbackObserver g_readback_observer = nullptr;
}  // namespace

void set_emu_readback_observer(ReadbackObserver observer) { g_readback_observer = observer; }

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  // A synchronous copy cannot be part of a CUDA graph (cudaMemcpy fails during
  // capture): inside one, copies go through copy_async (engine/graph.h).
  ENGINE_CHECK(!capturing() || (dst_dev.type == DeviceType::cpu && src_dev.type == DeviceType::cpu),
               "copy_bytes: a synchronous ", src_dev.str(), " -> ", dst_dev.str(), " copy of ", bytes,
               " bytes during CUDA graph capture (not capturable: read results after replay, or use copy_async)");
  if (dst_dev.type == DeviceType::cuda || src_dev.type == DeviceType::cuda) {
    cudart::memcpy(dst, dst_dev.type == DeviceType::cuda, src, src_dev.type == DeviceType::cuda, bytes);
    return;
  }
  std::memcpy(dst, src, bytes);  // cpu and emu memory are both host memory
  if (g_readback_observer && src_dev.type == DeviceType::emu && dst_dev.type == DeviceType::cpu)
    g_readback_observer(dst, bytes);
}

}  // namespace eng
