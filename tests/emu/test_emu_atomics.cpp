// Atomics and conversions under the emulator. Every thread of a multi-block
// grid hits the same few addresses (a counter, a histogram, a max), with a
// barrier in between so that the fibers interleave; results are compared with
// the same quantities computed by host loops. Float sums use multiples of
// 0.25 small enough to be exact in any order, so equality is the test.
#include "tests/test_util.h"
// Kernel sources come after the test headers: they define the CUDA keywords.
#include "kernels/cuda/portable.cuh"
#include "kernels/rng.h"

namespace {

constexpr int kBins = 7;

__device__ __host__ int hash_value(int i) { return int((unsigned(i) * 2654435761u) >> 7) % 100000 - 50000; }

struct Counters {
  float fsum;
  double dsum;
  int isum;
  unsigned usum;
  unsigned long long ullsum;
  int hist[kBins];
  int imax, imin;
  unsigned umax;
  float fmax;
  int cas_count;
  unsigned ring;
  int sub;
  unsigned bits_or;
};

__global__ void atomics_kernel(Counters* c) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int h = hash_value(i);
  atomicAdd(&c->fsum, 0.25f);
  atomicAdd(&c->dsum, 0.5);
  atomicAdd(&c->isum, i);
  __syncthreads();  // interleave: the second half of the updates starts after every thread's first
  atomicAdd(&c->usum, 3u);
  atomicAdd(&c->ullsum, 1ull << 33);
  atomicAdd(&c->hist[(h % kBins + kBins) % kBins], 1);
  atomicMax(&c->imax, h);
  atomicMin(&c->imin, h);
  atomicMax(&c->umax, unsigned(i) * 3u);
  atomic_max_float(&c->fmax, float(h) / 8);
  __syncthreads();
  int old = load_relaxed(&c->cas_count), assumed = 0;  // a plain read would race with the CAS of others
  do {
    assumed = old;
    old = atomicCAS(&c->cas_count, assumed, assumed + 1);
  } while (old != assumed);
  atomicInc(&c->ring, 9u);  // counts 0..9 and wraps
  atomicSub(&c->sub, 2);
  atomicOr(&c->bits_or, 1u << (i % 32));
}

__global__ void conversions_kernel(const float* in, float* bf16_out, float* half_out, int n) {
  const int i = int(threadIdx.x);
  if (i >= n) return;
#if defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
  bf16_out[i] = __bfloat162float(__float2bfloat16(in[i]));
  half_out[i] = __half2float(__float2half(in[i]));
#else
  bf16_out[i] = half_out[i] = in[i];
#endif
}

// Round to nearest even at `mantissa` bits, finite normal inputs only: the
// reference for bf16 (7) and fp16 (10) in their normal range.
[[maybe_unused]] float round_mantissa(float x, int mantissa) {
  const int e = std::ilogb(x);
  const float ulp = std::ldexp(1.0f, e - mantissa);
  return std::nearbyint(x / ulp) * ulp;  // nearbyint rounds ties to even by default
}

}  // namespace

TEST_CASE("emu atomics: many threads of many blocks colliding on few addresses", "[emu]") {
  const int blocks = 4, threads = 128, n = blocks * threads;
  Counters c{};
  c.imax = INT32_MIN, c.imin = INT32_MAX, c.fmax = -1e30f, c.sub = 5;
  LAUNCH_KERNEL(atomics_kernel, blocks, threads, 0, nullptr, &c);

  int hist[kBins] = {}, imax = INT32_MIN, imin = INT32_MAX;
  float fmax = -1e30f;
  for (int i = 0; i < n; ++i) {
    const int h = hash_value(i);
    ++hist[(h % kBins + kBins) % kBins];
    imax = std::max(imax, h), imin = std::min(imin, h);
    fmax = std::max(fmax, float(h) / 8);
  }
  CHECK(c.fsum == 0.25f * n);
  CHECK(c.dsum == 0.5 * n);
  CHECK(c.isum == n * (n - 1) / 2);
  CHECK(c.usum == 3u * n);
  CHECK(c.ullsum == (1ull << 33) * n);
  for (int b = 0; b < kBins; ++b) CHECK(c.hist[b] == hist[b]);
  CHECK(c.imax == imax);
  CHECK(c.imin == imin);
  CHECK(c.umax == 3u * (n - 1));
  CHECK(c.fmax == fmax);
  CHECK(c.cas_count == n);
  CHECK(c.ring == unsigned(n % 10));
  CHECK(c.sub == 5 - 2 * n);
  CHECK(c.bits_or == 0xffffffffu);
}

TEST_CASE("emu bf16/half conversions from the toolkit headers round to nearest even", "[emu]") {
  std::vector<float> in = {1.0f, 1.00390625f, 1.01171875f, -3.14159265f, 65504.0f, 1e-3f, 0.333333f, -7.5e3f};
  for (int i = 0; i < 40; ++i) in.push_back(eng::rng::normal(3, uint64_t(i)) * 100);
  const int n = int(in.size());
  std::vector<float> bf(in.size()), hf(in.size());
  LAUNCH_KERNEL(conversions_kernel, 1, 64, 0, nullptr, in.data(), bf.data(), hf.data(), n);
#if defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("x = " << in[i]);
    CHECK(bf[i] == round_mantissa(in[i], 7));
    CHECK(hf[i] == round_mantissa(in[i], 10));
  }
#else
  WARN("built without CUDA headers: bf16/half conversions not tested");
#endif
}
