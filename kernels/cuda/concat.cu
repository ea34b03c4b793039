// The strided row copy behind concat and split (engine/ops/layout.cpp):
// concat copies each input's rows into its column band of the output, split
// copies a band out, and each one's backward is the other. Reference:
// kernels/cpu/layout.cpp (copy_rows). Pure data movement in the storage
// type, so the copy is bit-exact whatever the dtype.
#include "kernels/cuda/concat.h"
#include "kernels/cuda/storage.cuh"

namespace eng::ENGINE_GPU_NS {

// copy_rows_kernel: one thread per element (grid-stride over rows * cols);
// consecutive threads take consecutive columns, so reads and writes of a row
// are coalesced.
// Launch: grid_for(rows * cols, 256) blocks of 256 threads.
// Preconditions: src and dst do not overlap; strides >= cols.
// bytes = 2 rows cols sizeof(T); flops = 0 (a division per element for the
// row index).
template <typename T>
__global__ void copy_rows_kernel(const T* __restrict__ src, int64_t src_stride, T* __restrict__ dst, int64_t dst_stride,
                                 int64_t rows, int64_t cols) {
  const int64_t n = rows * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * dst_stride + c] = src[r * src_stride + c];
  }
}

void copy_rows(gpu::Storage st, const void* src, int64_t src_stride, void* dst, int64_t dst_stride, int64_t rows,
               int64_t cols, void* stream) {
  if (rows == 0 || cols == 0) return;
  dispatch_storage(st, [&]<typename T>() {
    LAUNCH_KERNEL(copy_rows_kernel<T>, grid_for(rows * cols, 256), 256, 0, as_stream(stream),
                  static_cast<const T*>(src), src_stride, static_cast<T*>(dst), dst_stride, rows, cols);
  });
}

}  // namespace eng::ENGINE_GPU_NS
