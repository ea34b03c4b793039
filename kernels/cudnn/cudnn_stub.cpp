// kernels/cudnn/cudnn.h in builds without the cuDNN path (no CUDA, or the
// cuDNN frontend headers were not found at configure time): every call says
// why, none pretends.
#include "base/error.h"
#include "kernels/cudnn/cudnn.h"

namespace eng {

namespace {
std::string why() {
#if defined(ENGINE_HAVE_CUDA)
  return "this build has no cuDNN path (the cuDNN frontend headers were not found when it was configured: run "
         "scripts/setup.sh, then cmake again)";
#else
  return "this build has no CUDA, hence no cuDNN";
#endif
}
}  // namespace

bool cudnn_built() { return false; }
std::string cudnn_unavailable_reason() { return why(); }
std::string cudnn_version() { return ""; }

struct CudnnContext::Impl {};
CudnnContext::CudnnContext(int) { ENGINE_FAIL("cuDNN: ", why()); }
CudnnContext::~CudnnContext() = default;
int CudnnContext::device() const { return -1; }
size_t CudnnContext::cached_plans() const { return 0; }

std::string cudnn_sdpa_validate(const SdpaShape&, SdpaPass, int) { ENGINE_FAIL("cuDNN: ", why()); }
size_t cudnn_sdpa_workspace(CudnnContext&, const SdpaShape&, SdpaPass) { ENGINE_FAIL("cuDNN: ", why()); }
void cudnn_sdpa_forward(CudnnContext&, const SdpaShape&, const void*, const void*, const void*, void*, float*, void*,
                        void*) {
  ENGINE_FAIL("cuDNN: ", why());
}
void cudnn_sdpa_backward(CudnnContext&, const SdpaShape&, const void*, const void*, const void*, const void*,
                         const void*, const float*, void*, void*, void*, void*, void*) {
  ENGINE_FAIL("cuDNN: ", why());
}
std::string cudnn_layernorm_validate(int64_t, int64_t, LayernormPass, int) { ENGINE_FAIL("cuDNN: ", why()); }
size_t cudnn_layernorm_workspace(CudnnContext&, int64_t, int64_t, LayernormPass) { ENGINE_FAIL("cuDNN: ", why()); }
void cudnn_layernorm_forward(CudnnContext&, const float*, const float*, const float*, float*, float*, float*, int64_t,
                             int64_t, double, void*, void*) {
  ENGINE_FAIL("cuDNN: ", why());
}
void cudnn_layernorm_backward(CudnnContext&, const float*, const float*, const float*, const float*, const float*,
                              float*, float*, float*, int64_t, int64_t, void*, void*) {
  ENGINE_FAIL("cuDNN: ", why());
}
void cudnn_softmax_forward(CudnnContext&, gpu::Storage, const void*, void*, int64_t, int64_t, void*) {
  ENGINE_FAIL("cuDNN: ", why());
}
void cudnn_softmax_backward(CudnnContext&, gpu::Storage, const void*, const void*, void*, int64_t, int64_t, void*) {
  ENGINE_FAIL("cuDNN: ", why());
}

}  // namespace eng
