// Tensor basics: factories, views sharing storage, device and dtype copies,
// the allocator's counters, and the 16-bit float conversions.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tests/test_util.h"

using namespace eng;

TEST_CASE("tensor: from_vector round trip and shape queries", "[tensor]") {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.ndim() == 2);
  CHECK(t.size(-1) == 3);
  CHECK(t.numel() == 6);
  CHECK(t.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_WITH(t.size(2), Catch::Contains("out of range"));
}

TEST_CASE("tensor: reshape and slice are views of the same storage", "[tensor]") {
  Tensor t = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  Tensor r = t.reshape({2, -1});
  CHECK(r.shape() == Shape{2, 4});
  Tensor s = t.slice(1, 3);
  CHECK(s.shape() == Shape{2, 2});
  CHECK(s.to_vector() == std::vector<float>{2, 3, 4, 5});
  s.data<float>()[0] = 42;  // writes through to t
  CHECK(t.to_vector()[2] == 42);
  CHECK_THROWS_WITH(t.reshape({3, 3}), Catch::Contains("reshape") && Catch::Contains("(4, 2)"));
  CHECK_THROWS_WITH(t.slice(3, 5), Catch::Contains("slice"));
}

TEST_CASE("tensor: dtype conversion rounds like IEEE", "[tensor]") {
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0).
  Tensor t = Tensor::from_vector({1.0f + 1.0f / 256, 3.14159265f, -2.5f, 65504.f, 1e-7f}, {5});
  std::vector<float> b = t.to(DType::bf16).to(DType::f32).to_vector();
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == 3.140625f);
  CHECK(b[2] == -2.5f);
  std::vector<float> h = t.to(DType::f16).to(DType::f32).to_vector();
  CHECK(h[1] == 3.140625f);                         // nearest binary16 to pi
  CHECK(h[3] == 65504.f);                           // largest finite half
  CHECK(std::fabs(h[4] - 1.1920929e-7f) < 1e-12f);  // subnormal half: 2 * 2^-24
  CHECK(std::isinf(f16_to_float(float_to_f16(70000.f))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  for (int i = 0; i < 65536; i += 7) {  // every 7th half survives half -> float -> half
    const uint16_t x = uint16_t(i);
    const float f = f16_to_float(x);
    if (!std::isnan(f)) CHECK(float_to_f16(f) == x);
  }
}

TEST_CASE("tensor: copies between cpu and emu devices", "[tensor][device]") {
  Tensor t = Tensor::from_vector({1, 2, 3}, {3});
  Device emu = Device::parse("emu");
  Tensor e = t.to(emu);
  CHECK(e.device() == emu);
  CHECK(e.to(kCPU).to_vector() == std::vector<float>{1, 2, 3});
  CHECK(Device::parse("cuda:1").index == 1);
  CHECK_THROWS_WITH(Device::parse("tpu"), Catch::Contains("unknown device 'tpu'"));
  if (!cuda_available()) CHECK_THROWS_WITH(t.to(Device::parse("cuda")), Catch::Contains("cuda:0"));
}

TEST_CASE("allocator: caches freed blocks and tracks current and peak bytes", "[tensor][device]") {
  CachingAllocator& a = allocator_for(kCPU);
  a.empty_cache();
  const MemoryStats before = a.stats();
  {
    Tensor t = Tensor::empty({1000}, DType::f32);  // 4000 B, rounded to 4096
    CHECK(a.stats().current_bytes == before.current_bytes + 4096);
    CHECK(a.stats().peak_bytes >= before.current_bytes + 4096);
  }
  CHECK(a.stats().current_bytes == before.current_bytes);
  CHECK(a.stats().cached_bytes >= 4096);
  const size_t sys = a.stats().system_allocs;
  { Tensor t2 = Tensor::empty({1000}, DType::f32); }
  CHECK(a.stats().system_allocs == sys);  // reused from the cache
}

namespace {
// This process's address space in KiB, as the kernel counts it (what ulimit -v limits).
long vm_size_kb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7));
  return -1;
}
}  // namespace

TEST_CASE("allocator: large cpu blocks give their address space back when the cache is emptied", "[tensor][device]") {
  // Blocks of 1 MiB and more are the allocator's own mappings. From malloc,
  // a freed 8 MiB block raises glibc's mmap threshold, the 4 MiB blocks
  // after it come from the heap, and a small block above them keeps the heap
  // from shrinking when they are freed: 32 MiB would stay mapped for good.
  CachingAllocator& a = allocator_for(kCPU);
  a.empty_cache();
  { Tensor big = Tensor::zeros({int64_t(8) << 18}, DType::f32); }
  a.empty_cache();
  const long before = vm_size_kb();
  REQUIRE(before > 0);
  Tensor pin;
  {
    std::vector<Tensor> held;
    for (int i = 0; i < 8; ++i) held.push_back(Tensor::zeros({int64_t(1) << 20}, DType::f32));  // 4 MiB each
    pin = Tensor::zeros({16384}, DType::f32);                                                   // 64 KiB, above them
    CHECK(vm_size_kb() >= before + 32 * 1024);
  }
  a.empty_cache();
  CHECK(vm_size_kb() <= before + 8 * 1024);  // the 32 MiB are back, whatever else moved a little
}

TEST_CASE("tensor: randn is reproducible and roughly standard normal", "[tensor]") {
  Tensor a = Tensor::randn({10000}, 7), b = Tensor::randn({10000}, 7), c = Tensor::randn({10000}, 8);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());
  double m = 0, v = 0;
  for (float x : a.to_vector()) m += x;
  m /= 10000;
  for (float x : a.to_vector()) v += (x - m) * (x - m);
  v /= 10000;
  CHECK(std::fabs(m) < 0.05);
  CHECK(std::fabs(v - 1) < 0.05);
}

// emu memory starts poisoned (0xFF bytes: NaN floats, -1 ints), fresh from
// the system or reused from the cache, so an output a kernel forgets to write
// shows up as NaN in the kernel tests instead of an old tensor's values.
TEST_CASE("tensor: emu allocations are poisoned, fresh and reused", "[tensor][emu]") {
  const Device emu{DeviceType::emu, 0};
  void* first = nullptr;
  {
    Tensor t = Tensor::full({300}, 2.0, DType::f32, emu);
    first = t.data_ptr();
  }
  Tensor u = Tensor::empty({300}, DType::f32, emu);  // the same size class: from the cache
  CHECK(u.data_ptr() == first);
  for (double v : test::values(u.to(kCPU))) CHECK(std::isnan(v));
  Tensor i = Tensor::empty({7}, DType::i32, emu);
  for (double v : i.to(kCPU).to_f64_vector()) CHECK(v == -1.0);
}

TEST_CASE("tensor: scratch buffers hold at least the bytes asked, and are never empty", "[tensor]") {
  for (size_t bytes : {size_t(0), size_t(1), size_t(4), size_t(10), size_t(4097)}) {
    INFO(bytes);
    const Tensor s = Tensor::scratch(bytes, Device{DeviceType::emu, 0});
    CHECK(s.nbytes() >= std::max<size_t>(bytes, 1));
    CHECK(s.nbytes() < bytes + 8);
    CHECK(s.data_ptr() != nullptr);
  }
}
