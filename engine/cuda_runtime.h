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
void free_device(void* ptr);
void memcpy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes);
// For the kernel workbench (bench/): the GPU's name, a memset (its L2 flush)
// and events recorded on the default stream, the one the launchers use.
std::string device_name(int device);
void memset_device(void* ptr, int value, size_t bytes);
void* event_create();
void event_destroy(void* event);
void event_record(void* event);
float event_elapsed_ms(void* start, void* stop);  // waits for stop
}  // namespace eng::cudart
