// The few CUDA runtime calls the engine core needs (device memory, copies,
// device count), behind plain functions so that engine/ compiles without the
// CUDA headers. cuda_runtime.cpp implements them with the CUDA runtime;
// cuda_runtime_stub.cpp, used when ENGINE_CUDA is off, reports no devices.
#pragma once
#include <cstddef>
#include <string>

namespace eng::cudart {
bool built();
int device_count();  // 0 when no GPU answers (or no driver), never throws
void* malloc_device(size_t bytes, int device);
void* try_malloc_device(size_t bytes, int device);               // nullptr when the device is out of memory
size_t free_device_memory(int device, size_t* total = nullptr);  // cudaMemGetInfo's free bytes
void free_device(void* ptr);
void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
// For the kernel workbench (bench/): the GPU's name, a memset (its L2 flush)
// and events recorded on the default stream, the one the launchers use.
std::string device_name(int device);
int sm_count(int device);  // streaming multiprocessors
void memset_device(void* ptr, int value, size_t bytes);
void* event_create();
void event_destroy(void* event);
void event_record(void* event);
float event_elapsed_ms(void* start, void* stop);  // waits for stop
// Events between streams (engine/copy_stream.h): record on a stream, make a
// stream wait, ask or wait on the host.
void event_record_on(void* event, void* stream);
void stream_wait_event(void* stream, void* event);
bool event_query(void* event);  // complete (true) or still pending (false)
void event_synchronize(void* event);
// Streams, stream-ordered work and graphs (engine/graph.h). Handles are opaque.
void* stream_create(int device);  // non-blocking
void stream_destroy(void* stream);
void stream_synchronize(void* stream);
void memcpy_async(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes, void* stream);
void launch_host_func(void* stream, void (*fn)(void*), void* data);  // cudaLaunchHostFunc
void* malloc_host(size_t bytes);                                     // page-locked (cudaMallocHost)
void free_host(void* ptr);
void capture_begin(void* stream);    // relaxed mode: the allocator may cudaMalloc meanwhile
void* capture_end(void* stream);     // the instantiated graph (cudaGraphExec_t)
void capture_discard(void* stream);  // ends a capture and drops what it recorded
void graph_launch(void* exec, void* stream);
void graph_destroy(void* exec);
}  // namespace eng::cudart
