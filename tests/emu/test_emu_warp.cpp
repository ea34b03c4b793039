// Warp collectives under the emulator, against an independent host model.
// The emulator implements shuffles with the PTX ISA's shfl.sync pseudo-code
// (segment masks and clamp values); the model here is written from the CUDA
// programming guide's prose instead ("srcLane modulo width within the
// subsection", "own value if the source is out of range / in a later
// group"), so the two agree only if the emulator is right. Every shuffle is
// checked at widths 32/16/8 (and 4/2/1) on two warps, every lane argument in
// range and, for __shfl_sync, out of range and negative.
#include "tests/test_util.h"
// Kernel sources come after the test headers: they define the CUDA keywords.
#include "kernels/cuda/portable.cuh"

namespace {

enum class Shfl : int { idx, up, down, bfly };

// The lane whose value the caller gets, per the programming guide.
int model_source(Shfl op, int lane, int arg, int width) {
  const int seg = lane / width * width;  // first lane of the caller's subsection
  switch (op) {
    case Shfl::idx:
      return seg + ((arg % width) + width) % width;
    case Shfl::up:
      return lane - arg < seg ? lane : lane - arg;
    case Shfl::down:
      return lane + arg >= seg + width ? lane : lane + arg;
    case Shfl::bfly:
      return (lane ^ arg) >= seg + width ? lane : (lane ^ arg);
  }
  return -1;
}

int lane_value(int tid) { return tid * 7 + 3; }

// out[k * blockDim.x + tid] = shuffle `op` of lane_value(tid) with args[k].
__global__ void shuffle_kernel(Shfl op, int width, const int* args, int nargs, int* out) {
  const int tid = int(threadIdx.x);
  const int v = lane_value(tid);
  for (int k = 0; k < nargs; ++k) {
    int r = 0;
    switch (op) {
      case Shfl::idx:
        r = __shfl_sync(0xffffffffu, v, args[k], width);
        break;
      case Shfl::up:
        r = __shfl_up_sync(0xffffffffu, v, unsigned(args[k]), width);
        break;
      case Shfl::down:
        r = __shfl_down_sync(0xffffffffu, v, unsigned(args[k]), width);
        break;
      case Shfl::bfly:
        r = __shfl_xor_sync(0xffffffffu, v, args[k], width);
        break;
    }
    out[k * int(blockDim.x) + tid] = r;
  }
}

}  // namespace

TEST_CASE("emu shuffles match the programming guide at every width and lane argument", "[emu]") {
  const int threads = 64;  // two warps: results must not leak between them
  const struct {
    Shfl op;
    const char* name;
    int lo, hi;
  } cases[] = {{Shfl::idx, "__shfl_sync", -33, 40},
               {Shfl::up, "__shfl_up_sync", 0, 31},
               {Shfl::down, "__shfl_down_sync", 0, 31},
               {Shfl::bfly, "__shfl_xor_sync", 0, 31}};
  for (const auto& c : cases) {
    std::vector<int> args;
    for (int a = c.lo; a <= c.hi; ++a) args.push_back(a);
    for (const int width : {32, 16, 8, 4, 2, 1}) {
      std::vector<int> out(args.size() * threads, 0);
      LAUNCH_KERNEL(shuffle_kernel, 1, threads, 0, nullptr, c.op, width, args.data(), int(args.size()), out.data());
      int bad = 0;
      for (size_t k = 0; k < args.size(); ++k)
        for (int tid = 0; tid < threads; ++tid) {
          const int want = lane_value(tid / 32 * 32 + model_source(c.op, tid % 32, args[k], width));
          const int got = out[k * threads + size_t(tid)];
          if (got != want && bad++ < 3)
            FAIL_CHECK(c.name << " width " << width << " arg " << args[k] << " thread " << tid << ": got " << got
                              << ", model says " << want);
        }
      CHECK(bad == 0);
    }
  }
}

namespace {
// Two disjoint groups shuffle at the same time; a third group reads a lane
// outside its mask (undefined on the GPU, poison 0xFF.. here).
__global__ void partial_mask_kernel(int* out) {
  const int lane = int(threadIdx.x) % 32;
  const int v = lane_value(lane);
  if (lane < 16)
    out[lane] = __shfl_xor_sync(0x0000ffffu, v, 5);
  else if (lane < 24)
    out[lane] = __shfl_down_sync(0x00ff0000u, v, 2, 8);
  else
    out[lane] = __shfl_sync(0xff000000u, v, lane * 5 % 32);  // lanes 26..30 read lanes outside the mask
}

// out[0..3] for the masked lanes, per lane: ballot, any, all(pred), all(true).
__global__ void vote_kernel(unsigned mask, unsigned* out) {
  const int lane = int(threadIdx.x);
  if (!(mask >> lane & 1u)) return;  // lanes outside the mask leave: the others must not wait for them
  const bool pred = lane % 3 == 0;
  out[4 * lane + 0] = __ballot_sync(mask, pred);
  out[4 * lane + 1] = unsigned(__any_sync(mask, pred));
  out[4 * lane + 2] = unsigned(__all_sync(mask, pred));
  out[4 * lane + 3] = unsigned(__all_sync(mask, lane < 32));
}

// Lanes >= `alive` exit first; the full-mask collectives count the others only.
__global__ void exited_lanes_kernel(int alive, int src, unsigned* out) {
  const int tid = int(threadIdx.x), lane = tid % 32;
  if (lane >= alive) return;
  out[2 * tid] = __ballot_sync(0xffffffffu, 1);
  out[2 * tid + 1] = unsigned(__shfl_sync(0xffffffffu, lane * 10 + 1, src));
}

// Each warp exchanges through shared memory guarded by __syncwarp only;
// warp 1 does it twice, so the warps are at different __syncwarp counts.
__global__ void syncwarp_kernel(int* out) {
  __shared__ int smem[96];
  const int tid = int(threadIdx.x), lane = tid % 32, base = tid - lane;
  smem[tid] = tid;
  __syncwarp();
  int v = smem[base + (lane + 1) % 32];
  if (tid / 32 == 1) {
    __syncwarp(0xffffffffu);
    smem[tid] = v * 2;
    __syncwarp();
    v = smem[base + (lane + 1) % 32];
  }
  out[tid] = v;
}

// Shuffles of 8-byte and 2-byte types move whole values.
__global__ void typed_shuffle_kernel(double* d_out, float* h_out) {
  const int lane = int(threadIdx.x);
  d_out[lane] = __shfl_xor_sync(0xffffffffu, 1e10 + lane + 0.25, 3);
#if defined(ENGINE_EMU_HAVE_CUDA_HEADERS)
  h_out[lane] = __bfloat162float(__shfl_down_sync(0xffffffffu, __float2bfloat16(float(lane)), 1));
#else
  h_out[lane] = float(__shfl_down_sync(0xffffffffu, lane, 1));
#endif
}
}  // namespace

TEST_CASE("emu shuffles with partial masks: disjoint groups, reads outside the mask are poison", "[emu]") {
  std::vector<int> out(32, 0);
  LAUNCH_KERNEL(partial_mask_kernel, 1, 32, 0, nullptr, out.data());
  for (int lane = 0; lane < 32; ++lane) {
    int want = 0;
    if (lane < 16)
      want = lane_value(lane ^ 5);
    else if (lane < 24)
      want = lane_value(model_source(Shfl::down, lane, 2, 8));
    else
      want = lane * 5 % 32 >= 24 ? lane_value(lane * 5 % 32) : -1;
    INFO("lane " << lane);
    CHECK(out[size_t(lane)] == want);
  }
}

TEST_CASE("emu ballot/any/all with partial masks", "[emu]") {
  for (const unsigned mask : {0xffffffffu, 0x00ff00ffu, 0x80000001u, 0x00000004u}) {
    std::vector<unsigned> out(128, 0xdeadu);
    LAUNCH_KERNEL(vote_kernel, 1, 32, 0, nullptr, mask, out.data());
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
      if ((mask >> l & 1u) && l % 3 == 0) ballot |= 1u << l;
    const unsigned all_pred = (ballot == mask) ? 1u : 0u;
    for (int l = 0; l < 32; ++l) {
      INFO("mask " << mask << " lane " << l);
      if (!(mask >> l & 1u)) {
        CHECK(out[4 * size_t(l)] == 0xdeadu);
        continue;
      }
      CHECK(out[4 * size_t(l)] == ballot);
      CHECK(out[4 * size_t(l) + 1] == (ballot != 0 ? 1u : 0u));
      CHECK(out[4 * size_t(l) + 2] == all_pred);
      CHECK(out[4 * size_t(l) + 3] == 1u);
    }
  }
}

TEST_CASE("emu warp collectives ignore exited lanes and missing lanes of a partial warp", "[emu]") {
  const auto run = [](int threads, int alive, int src) {
    std::vector<unsigned> out(2 * size_t(threads), 0);
    LAUNCH_KERNEL(exited_lanes_kernel, 1, threads, 0, nullptr, alive, src, out.data());
    return out;
  };
  const std::vector<unsigned> a = run(32, 20, 19);
  for (size_t t = 0; t < 20; ++t) CHECK(a[2 * t] == 0x000fffffu);
  for (size_t t = 0; t < 20; ++t) CHECK(a[2 * t + 1] == 191u);
  const std::vector<unsigned> b = run(40, 32, 5);  // the second warp has lanes 0..7 only
  for (size_t t = 0; t < 40; ++t) CHECK(b[2 * t] == (t < 32 ? 0xffffffffu : 0xffu));
  for (size_t t = 0; t < 40; ++t) CHECK(b[2 * t + 1] == 51u);
  const std::vector<unsigned> c = run(32, 20, 25);  // reading an exited lane: poison
  for (size_t t = 0; t < 20; ++t) CHECK(c[2 * t + 1] == 0xffffffffu);
}

TEST_CASE("emu __syncwarp is per warp and accepts a mask", "[emu]") {
  std::vector<int> out(96, 0);
  LAUNCH_KERNEL(syncwarp_kernel, 1, 96, 0, nullptr, out.data());
  for (int tid = 0; tid < 96; ++tid) {
    const int lane = tid % 32, base = tid - lane;
    const int first = base + (lane + 1) % 32;
    const int want = tid / 32 == 1 ? 2 * (base + (first % 32 + 1) % 32) : first;
    INFO("thread " << tid);
    CHECK(out[size_t(tid)] == want);
  }
}

TEST_CASE("emu shuffles move 8-byte and 2-byte types whole", "[emu]") {
  std::vector<double> d(32);
  std::vector<float> h(32);
  LAUNCH_KERNEL(typed_shuffle_kernel, 1, 32, 0, nullptr, d.data(), h.data());
  for (int l = 0; l < 32; ++l) {
    CHECK(d[size_t(l)] == 1e10 + (l ^ 3) + 0.25);
    CHECK(h[size_t(l)] == float(l < 31 ? l + 1 : l));
  }
}
