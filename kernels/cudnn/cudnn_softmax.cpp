// cuDNN's softmax (the legacy cudnnSoftmaxForward/Backward of cudnn_ops) as
// the workbench's vendor row beside kernels/cuda/softmax.cu: softmax over the
// last dim of (rows, C), the rows as cuDNN's N and the row as its C of an
// (N, C, 1, 1) tensor, CUDNN_SOFTMAX_ACCURATE (the max is subtracted first,
// as ours does) and CUDNN_SOFTMAX_MODE_INSTANCE (over C H W per n).
// Memory traffic, the same as ours: forward reads x and writes y (2 rows C
// elements), backward reads y and dy and writes dx (3 rows C).
#include "kernels/cudnn/cudnn_impl.h"

namespace eng {

namespace {

cudnnDataType_t data_type(gpu::Storage st) {
  return st == gpu::Storage::bf16 ? CUDNN_DATA_BFLOAT16 : st == gpu::Storage::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

// An (rows, C, 1, 1) descriptor, destroyed with the scope.
struct RowsDesc {
  cudnnTensorDescriptor_t d = nullptr;
  RowsDesc(gpu::Storage st, int64_t rows, int64_t C) {
    ENGINE_CHECK(rows >= 1 && C >= 1 && rows <= INT32_MAX && C <= INT32_MAX, "cuDNN softmax: bad shape (", rows, ", ",
                 C, ")");
    CUDNN_CHECK(cudnnCreateTensorDescriptor, &d);
    CUDNN_CHECK(cudnnSetTensor4dDescriptor, d, CUDNN_TENSOR_NCHW, data_type(st), int(rows), int(C), 1, 1);
  }
  ~RowsDesc() {
    if (d) ENGINE_CUDNN_FN(cudnnDestroyTensorDescriptor)(d);
  }
  RowsDesc(const RowsDesc&) = delete;
  RowsDesc& operator=(const RowsDesc&) = delete;
};

}  // namespace

// alpha and beta are float for every data type but double (cuDNN's scaling rule).
// Errors name the call and the shape.
template <typename F>
void with_shape(const char* what, int64_t rows, int64_t C, F f) {
  try {
    f();
  } catch (const Error& e) {
    ENGINE_FAIL("cuDNN ", what, " (rows=", rows, " C=", C, "): ", e.what());
  }
}

void cudnn_softmax_forward(CudnnContext& ctx, gpu::Storage st, const void* x, void* y, int64_t rows, int64_t C,
                           void* stream) {
  with_shape("softmax forward", rows, C, [&] {
    const RowsDesc desc(st, rows, C);
    const float alpha = 1.f, beta = 0.f;
    cudnn_set_stream(ctx, stream);
    CUDNN_CHECK(cudnnSoftmaxForward, ctx.impl().handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha,
                desc.d, x, &beta, desc.d, y);
  });
}

void cudnn_softmax_backward(CudnnContext& ctx, gpu::Storage st, const void* y, const void* dy, void* dx, int64_t rows,
                            int64_t C, void* stream) {
  with_shape("softmax backward", rows, C, [&] {
    const RowsDesc desc(st, rows, C);
    const float alpha = 1.f, beta = 0.f;
    cudnn_set_stream(ctx, stream);
    CUDNN_CHECK(cudnnSoftmaxBackward, ctx.impl().handle, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha,
                desc.d, y, desc.d, dy, &beta, desc.d, dx);
  });
}

}  // namespace eng
