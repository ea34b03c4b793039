// Launchers of kernels/cuda/cross_entropy.cu: the fused classifier (softmax
// cross-entropy over the vocabulary, loss and dlogits in one kernel) and the
// in-place rescale of a saved dlogits by the loss's incoming gradient, and
// the two scalars of the mean: 1/valid rows (counts = {1/valid, valid}) and
// the mean loss. Scales and scalars are device pointers (no host round trip).
// The fused kernel's rows are ld >= V elements apart (a vocabulary padded
// for aligned GEMMs): the classes are the first V, and dlogits is written
// over the whole ld, zero in the padding.
// targets are int32 and losses fp32 whatever the storage dtype of the logits.
#pragma once
#include <atomic>

#include "kernels/cuda/env_form.h"
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {
// Which form of the fused kernel runs (docs/kernels/cross_entropy.md,
// "Three forms"): `automatic` takes the first the device and the row allow
// of prefetch (two rows in shared memory, the next one's copy in flight),
// cached (one row in shared memory) and twice (the row read twice from
// global memory). The others force that form where it applies (a form that
// does not fit falls to the next): for A/B runs on a GPU
// (ENGINE_CROSS_ENTROPY=prefetch|cached|twice) and for tests.
enum class CrossEntropyForm { automatic, prefetch, cached, twice };
// -1: not yet read from ENGINE_CROSS_ENTROPY. One variable for the program
// (inline), whichever of the cuda and emulator builds reads it.
inline std::atomic<int> g_cross_entropy_form{-1};
inline void set_cross_entropy_form(CrossEntropyForm f) { g_cross_entropy_form.store(int(f)); }
inline CrossEntropyForm cross_entropy_form() {
  int v = g_cross_entropy_form.load();
  if (v < 0) {
    v = env_form("ENGINE_CROSS_ENTROPY", {"auto", "prefetch", "cached", "twice"}, "the fused cross-entropy",
                 "docs/kernels/cross_entropy.md");  // in the enum's order
    g_cross_entropy_form.store(v);
  }
  return CrossEntropyForm(v);
}
}  // namespace eng::gpu

#define ENGINE_CROSS_ENTROPY_LAUNCHERS                                                                                \
  void cross_entropy_fused(gpu::Storage st, const void* logits, const int32_t* targets, float* losses, void* dlogits, \
                           int64_t N, int64_t V, int64_t ld, const float* dloss_scale, int32_t ignore_index,          \
                           void* stream);                                                                             \
  void cross_entropy_scale_grad(gpu::Storage st, void* dlogits, const float* scale, int64_t n, void* stream);         \
  void cross_entropy_count_valid(const int32_t* targets, int64_t N, int32_t ignore_index, float grad_scale,           \
                                 float* counts, void* stream);                                                        \
  void cross_entropy_mean(gpu::Storage st, const float* losses, int64_t N, const float* counts, void* out,            \
                          void* stream);
ENGINE_GPU_DECLARE(ENGINE_CROSS_ENTROPY_LAUNCHERS)

// Costs (kernels/kernel_cost.h): fused: bytes = N V sizeof(T) (logits) + N ld
// sizeof(T) (dlogits, when written) + 8 N (targets, losses), flops ~ 5 N V
// + 4 N V for dlogits; the logits counted once (the .cu counts pass 2's
// re-read of the row too, which caches absorb for all but huge rows), and
// every row as valid (an ignored row reads nothing). scale_grad: bytes =
// 2 n sizeof(T), flops = n. count_valid: bytes = 4 N + 8, flops = N. mean:
// bytes = 4 N + 4 + sizeof(T), flops = N.
namespace eng::kcost {
inline kprof::Cost cross_entropy_fused(gpu::Storage st, const void*, const int32_t*, float*, void* dlogits, int64_t N,
                                       int64_t V, int64_t ld, const float*, int32_t, void*) {
  const double nv = double(N) * double(V), written = dlogits ? double(N) * double(ld) : 0;
  return kprof::memory((nv + written) * gpu::storage_bytes(st) + 8 * double(N), nv * (dlogits ? 9 : 5));
}
inline kprof::Cost cross_entropy_scale_grad(gpu::Storage st, void*, const float*, int64_t n, void*) {
  return kprof::memory(2 * double(n) * gpu::storage_bytes(st), double(n));
}
inline kprof::Cost cross_entropy_count_valid(const int32_t*, int64_t N, int32_t, float, float*, void*) {
  return kprof::memory(4 * double(N) + 8, double(N));
}
inline kprof::Cost cross_entropy_mean(gpu::Storage st, const float*, int64_t N, const float*, void*, void*) {
  return kprof::memory(4 * double(N) + 4 + gpu::storage_bytes(st), double(N));
}
}  // namespace eng::kcost
