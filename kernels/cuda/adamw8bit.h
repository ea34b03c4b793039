// Launcher of kernels/cuda/adamw8bit.cu: the fused multi-tensor 8-bit AdamW
// step (every quantized parameter in one launch). The engine builds the
// descriptors on the host and copies them to the device once per step
// (engine/optim/adamw8bit.cpp), as for the fp32 AdamW (adamw.h).
#pragma once
#include "kernels/cuda/gpu_ops.h"

namespace eng::gpu {

// Elements per quantization block: one fp32 absmax per moment per block.
inline constexpr int64_t kQuantBlock = 256;
inline int64_t quant_blocks(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

// One parameter of a fused 8-bit AdamW step: fp32 master weights, moments as
// uint8 codes into the signed (m) and unsigned (v) dynamic maps with one
// absmax per block. The constants are AdamW's (adamw.h), per parameter.
struct Adam8bitTensor {
  float* param;
  const float* grad;
  uint8_t* m8;
  float* m_absmax;
  uint8_t* v8;
  float* v_absmax;
  int64_t n;            // elements
  int64_t block_begin;  // first quantization block of this tensor in the launch (prefix sum)
  float decay;          // 1 - lr * weight_decay
  float step_size;      // lr / (1 - beta1^t)
  float sqrt_bc2;       // sqrt(1 - beta2^t)
  float unused_ = 0.f;  // keeps the struct a multiple of 8 bytes
};

}  // namespace eng::gpu

// maps: 512 floats on the device, the signed map then the unsigned one (sorted).
#define ENGINE_ADAMW8BIT_LAUNCHERS                                                                               \
  void adamw8bit_multi_tensor(const gpu::Adam8bitTensor* d_tensors, int num_tensors, int64_t num_blocks,         \
                              const float* d_maps, float beta1, float beta2, float eps, const float* grad_scale, \
                              void* stream);
ENGINE_GPU_DECLARE(ENGINE_ADAMW8BIT_LAUNCHERS)

// Costs (kernels/kernel_cost.h): bytes = 16 n + 16 n / 256 (read p, g, m8,
// v8; write p, m8, v8; the two absmaxes of each block read and written);
// flops ~ 25 n. n is not known on the host (the descriptors live in device
// memory): num_blocks x kQuantBlock, an upper bound (each tensor's last
// block is partial); the absmax bytes are exact.
namespace eng::kcost {
inline kprof::Cost adamw8bit_multi_tensor(const gpu::Adam8bitTensor*, int num_tensors, int64_t num_blocks, const float*,
                                          float, float, float, const float*, void*) {
  if (num_tensors == 0 || num_blocks == 0) return {};
  const double n = double(num_blocks) * gpu::kQuantBlock;
  return kprof::memory(16 * n + 16 * double(num_blocks), 25 * n);
}
}  // namespace eng::kcost
