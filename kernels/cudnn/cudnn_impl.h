// What the cuDNN translation units share (CUDA builds with the cuDNN path
// only; not for code outside kernels/cudnn/): the handle-owning context, the
// symbol lookup into the dlopen'ed libcudnn, and CUDNN_CHECK. The frontend's
// part is cudnn_graph.h, kept apart because the frontend is slow to compile.
// libcudnn is never linked (kernels/cudnn/cudnn.h says why): every cuDNN
// function is reached through its symbol, typed by its declaration in
// <cudnn.h>, so a mismatched signature is a compile error, not a crash.
#pragma once
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>

#include "base/error.h"
#include "kernels/cudnn/cudnn.h"

namespace eng {

// The address of a libcudnn function (the library is loaded first); throws
// with cudnn_unavailable_reason() when the library cannot be loaded, and
// names the symbol when this libcudnn lacks it.
void* cudnn_symbol(const char* name);

// cuDNN's name for a status, through the loaded library.
std::string cudnn_status_name(cudnnStatus_t status);

struct GraphPlan;  // one built frontend graph (cudnn_graph.h)

struct CudnnContext::Impl {
  int device = 0;
  cudnnHandle_t handle = nullptr;
  std::map<std::string, std::shared_ptr<GraphPlan>> plans;  // by op, shape and pass
};

// Points the handle at a stream (cudaStream_t; nullptr: the legacy default stream).
void cudnn_set_stream(CudnnContext& ctx, void* stream);

}  // namespace eng

// Calls cuDNN function fn (as declared in <cudnn.h>) through the loaded
// library; the symbol is looked up once per call site.
#define ENGINE_CUDNN_FN(fn)                                                            \
  ([]() {                                                                              \
    static auto* const f_ = reinterpret_cast<decltype(&fn)>(::eng::cudnn_symbol(#fn)); \
    return f_;                                                                         \
  }())

// The engine's check idiom (base/error.h) for cuDNN calls: file:line, the call
// as written, cuDNN's name for the status.
#define CUDNN_CHECK(fn, ...)                                                                                     \
  do {                                                                                                           \
    const cudnnStatus_t status_ = ENGINE_CUDNN_FN(fn)(__VA_ARGS__);                                              \
    ENGINE_CHECK(status_ == CUDNN_STATUS_SUCCESS,                                                                \
                 #fn "(" #__VA_ARGS__ ") failed: ", ::eng::cudnn_status_name(status_), " (", int(status_), ")"); \
  } while (0)
