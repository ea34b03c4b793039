// Loading libcudnn at run time (kernels/cudnn/cudnn.h says why it is not
// linked), the availability answer, and the handle-owning context.
// The library is the one ENGINE_CUDNN_LIBRARY names, else libcudnn.so.9 from
// the loader's search path (where the toolkit, Debian's package and the
// nvidia-cudnn wheels put it). cuDNN loads its own sub-libraries (graph,
// engines, ops) by name from there.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <mutex>

#include "kernels/cudnn/cudnn_impl.h"

// The frontend, built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, finds every
// backend function through this handle, which its user must define and set.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace eng {

namespace {

struct Loaded {
  void* handle = nullptr;
  std::string error;  // why loading failed
};

// The frontend calls the CUDA runtime through a libcudart it dlopens itself:
// libcudart.so.12, else .so.13, whichever the loader finds first. A machine
// with both (a CUDA 12 wheel beside the toolkit) would give it a runtime
// other than ours, whose streams and current device it would then be handed.
// Its CUDNN_FRONTEND_CUDART_LIB_NAME names the one to open: the file this
// process already has loaded for us (dlopen of it returns the same copy),
// unless the user set it.
// (The loaded objects are searched by name: the address of a runtime function
// could be the executable's PLT stub rather than libcudart's code.)
void pin_frontend_cudart() {
  std::string ours;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const size_t slash = path.rfind('/');
        if (path.compare(slash == std::string::npos ? 0 : slash + 1, 12, "libcudart.so") != 0) return 0;
        *static_cast<std::string*>(out) = path;
        return 1;  // stop at the first
      },
      &ours);
  if (!ours.empty()) setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", ours.c_str(), /*overwrite=*/0);
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    const char* env = std::getenv("ENGINE_CUDNN_LIBRARY");
    const std::string name = env && *env ? env : "libcudnn.so.9";
    dlerror();
    r.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!r.handle) {
      const char* e = dlerror();
      r.error = "cannot load " + name + " (" + (e ? e : "unknown error") +
                "); install cuDNN 9 or point ENGINE_CUDNN_LIBRARY at it (scripts/cudnn_env.sh finds a pip wheel's)";
      return r;
    }
    using GetVersion = decltype(&cudnnGetVersion);
    auto* get_version = reinterpret_cast<GetVersion>(dlsym(r.handle, "cudnnGetVersion"));
    if (!get_version) {
      r.error = name + " has no cudnnGetVersion: not a cuDNN library";
    } else if (get_version() / 10000 != 9) {
      r.error = name + " is cuDNN " + std::to_string(get_version()) + ", this build needs cuDNN 9";
    }
    if (!r.error.empty()) {
      dlclose(r.handle);
      r.handle = nullptr;
      return r;
    }
    cudnn_frontend::cudnn_dlhandle = r.handle;
    pin_frontend_cudart();
    return r;
  }();
  return l;
}

}  // namespace

bool cudnn_built() { return true; }

std::string cudnn_unavailable_reason() {
  const Loaded& l = loaded();
  if (!l.handle) return l.error;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for later callers
    return "no GPU answers (cuDNN " + cudnn_version() + " is loaded)";
  }
  return "";
}

std::string cudnn_version() {
  if (!loaded().handle) return "";
  const size_t v = ENGINE_CUDNN_FN(cudnnGetVersion)();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

void* cudnn_symbol(const char* name) {
  const Loaded& l = loaded();
  ENGINE_CHECK(l.handle, "cuDNN: ", l.error);
  void* f = dlsym(l.handle, name);
  ENGINE_CHECK(f, "cuDNN: the loaded library has no ", name);
  return f;
}

std::string cudnn_status_name(cudnnStatus_t status) { return ENGINE_CUDNN_FN(cudnnGetErrorString)(status); }

CudnnContext::CudnnContext(int device) : impl_(std::make_unique<Impl>()) {
  const std::string why = cudnn_unavailable_reason();
  ENGINE_CHECK(why.empty(), "cuDNN: ", why);
  impl_->device = device;
  // cudnnCreate binds the handle to the current device: select ours, then restore the caller's.
  int prev = 0;
  ENGINE_CHECK(cudaGetDevice(&prev) == cudaSuccess && cudaSetDevice(device) == cudaSuccess,
               "cuDNN: cannot select cuda device ", device);
  const cudnnStatus_t status = ENGINE_CUDNN_FN(cudnnCreate)(&impl_->handle);
  cudaSetDevice(prev);
  ENGINE_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN: cudnnCreate on cuda device ", device,
               " failed: ", cudnn_status_name(status));
}

CudnnContext::~CudnnContext() {
  impl_->plans.clear();  // the plans refer to the handle
  if (impl_->handle) ENGINE_CUDNN_FN(cudnnDestroy)(impl_->handle);
}

int CudnnContext::device() const { return impl_->device; }
size_t CudnnContext::cached_plans() const { return impl_->plans.size(); }

void cudnn_set_stream(CudnnContext& ctx, void* stream) {
  CUDNN_CHECK(cudnnSetStream, ctx.impl().handle, static_cast<cudaStream_t>(stream));
}

}  // namespace eng
