// Stand-in for the CUDA runtime in builds without CUDA: no devices answer,
// and any attempt to use one is a clear error.
#include "base/error.h"
#include "engine/cuda_runtime.h"

namespace eng::cudart {
bool built() { return false; }
int device_count() { return 0; }
void* malloc_device(size_t, int) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void* try_malloc_device(size_t, int) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
size_t free_device_memory(int, size_t*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void free_device(void*) {}
void memcpy(void*, bool, const void*, bool, size_t) {
  ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)");
}
std::string device_name(int) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
int sm_count(int) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void memset_device(void*, int, size_t) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void* event_create() { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void event_destroy(void*) {}
void event_record(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
float event_elapsed_ms(void*, void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void event_record_on(void*, void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void stream_wait_event(void*, void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
bool event_query(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void event_synchronize(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void* stream_create(int) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void stream_destroy(void*) {}
void stream_synchronize(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void memcpy_async(void*, bool, const void*, bool, size_t, void*) {
  ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)");
}
void launch_host_func(void*, void (*)(void*), void*) {
  ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)");
}
void* malloc_host(size_t) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void free_host(void*) {}
void capture_begin(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void* capture_end(void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void graph_launch(void*, void*) { ENGINE_FAIL("this build has no CUDA (configure with ENGINE_CUDA=ON)"); }
void graph_destroy(void*) {}
void capture_discard(void*) {}
}  // namespace eng::cudart
