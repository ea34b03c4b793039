// Device parsing, the caching allocator, and cross-device copies.
#include "engine/device.h"

#include <cstdlib>
#include <cstring>

#include "engine/cuda_runtime.h"
#include "engine/error.h"

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
  ENGINE_FAIL("unknown device '", s, "' (expected cpu, cuda, cuda:N, emu or auto)");
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

void* CachingAllocator::system_alloc(size_t bytes) {
  ++stats_.system_allocs;
  if (dev_.type == DeviceType::cuda) return cudart::malloc_device(bytes, dev_.index);
  void* p = std::aligned_alloc(64, bytes);
  ENGINE_CHECK(p, "out of host memory allocating ", bytes, " bytes on ", dev_.str());
  return p;
}

void CachingAllocator::system_free(void* ptr) {
  if (dev_.type == DeviceType::cuda)
    cudart::free_device(ptr);
  else
    std::free(ptr);
}

void* CachingAllocator::allocate(size_t bytes) {
  const size_t n = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = free_.find(n);
  if (it != free_.end()) {
    p = it->second;
    free_.erase(it);
    stats_.cached_bytes -= n;
  } else {
    p = system_alloc(n);
  }
  stats_.current_bytes += n;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  return p;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  const size_t n = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  free_.emplace(n, ptr);
  stats_.current_bytes -= n;
  stats_.cached_bytes += n;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [n, p] : free_) system_free(p);
  free_.clear();
  stats_.cached_bytes = 0;
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
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

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  if (dst_dev.type == DeviceType::cuda || src_dev.type == DeviceType::cuda) {
    cudart::memcpy(dst, dst_dev.type == DeviceType::cuda, src, src_dev.type == DeviceType::cuda, bytes);
    return;
  }
  std::memcpy(dst, src, bytes);  // cpu and emu memory are both host memory
}

}  // namespace eng
