// General permute of a contiguous tensor of up to 8 dimensions. Reference:
// kernels/cpu/layout.cpp (permute). Pure data movement, so the kernel is
// templated on the element size only (2 or 4 bytes) and copies bits: the
// result is bit-exact whatever the dtype, NaN payloads included.
// One thread per output element (grid-stride): it splits its output index
// into coordinates with the output shape and dots them with the input
// strides of the matching dimensions. Writes are coalesced; reads are
// strided when the last dimension moves (a transpose reads a column per
// warp), which a shared-memory tiled transpose would fix (docs/kernels/elementwise.md).
#include "base/error.h"
#include "kernels/cuda/permute.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

namespace {
constexpr int kMaxDims = 8;

// Passed by value as a kernel argument (160 bytes, well under the 4 KiB limit).
struct PermuteShape {
  int64_t out_shape[kMaxDims];
  int64_t in_stride[kMaxDims];  // input stride of the dimension that lands at output position d
  int ndim;
};
}  // namespace

// out[o] = x[src(o)], src(o) = sum_d coord_d(o) * in_stride[d].
// Launch: grid_for(n, 256) blocks of 256 threads, grid-stride.
// Preconditions: 0 <= ndim <= 8 (0: one element); x and out do not overlap.
// bytes = 2 n sizeof(T); flops = 0 (~3 integer ops per dimension per element).
template <typename T>
__global__ void permute_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, PermuteShape s) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += stride) {
    int64_t rem = o, src = 0;
    for (int d = s.ndim - 1; d >= 0; --d) {
      const int64_t idx = rem % s.out_shape[d];
      rem /= s.out_shape[d];
      src += idx * s.in_stride[d];
    }
    out[o] = x[src];
  }
}

void permute_forward(gpu::Storage st, const void* x, void* out, const int64_t* shape, const int* dims, int ndim,
                     void* stream) {
  ENGINE_CHECK(ndim >= 0 && ndim <= kMaxDims, "permute_forward: ", ndim, " dims (at most ", kMaxDims, ")");
  PermuteShape s{};
  s.ndim = ndim;
  int64_t in_stride[kMaxDims], n = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    in_stride[d] = n;
    n *= shape[d];
  }
  for (int d = 0; d < ndim; ++d) {
    s.out_shape[d] = shape[dims[d]];
    s.in_stride[d] = in_stride[dims[d]];
  }
  if (n == 0) return;
  const unsigned grid = grid_for(n, 256);
  if (st == gpu::Storage::f32)
    LAUNCH_KERNEL(permute_kernel<uint32_t>, grid, 256, 0, as_stream(stream), static_cast<const uint32_t*>(x),
                  static_cast<uint32_t*>(out), n, s);
  else
    LAUNCH_KERNEL(permute_kernel<uint16_t>, grid, 256, 0, as_stream(stream), static_cast<const uint16_t*>(x),
                  static_cast<uint16_t*>(out), n, s);
}

}  // namespace eng::ENGINE_GPU_NS
