// The memory a run plans for, checked before its first step against what
// the device has free (engine/memory_report.h: memory_headroom), so a batch
// that cannot fit is refused in one line with the figure and a batch size
// that fits, instead of growing until the machine swaps or the GPU's
// allocator fails mid-step.
//
// planned = state + micro-batch x activations per sample, where
//   state: the memory report's accounting per parameter of this rank's
//     shard: fp32 weights 4 (+ 2 for the 16-bit copies at O2/O3), fp32
//     gradients 4, AdamW moments 8 (divided over dp with ZeRO-1);
//   activations: what the forward keeps for the backward, per token:
//     per block  A x C           the block's C-wide tensors: its input, the
//                                two layernorm outputs, q, k, v, the attention
//                                output, the residual after attention, and
//                                the MLP's 4C input and output of the GELU:
//                                16 of them, so A = 64 in fp32 and 32 in
//                                bf16/fp16 on emu and cuda; 72 measured on the
//                                cpu at O2, whose kernels compute in fp32;
//                  + attention   cpu: its (T x T per head) fp32 probabilities,
//                                4 NH T; emu/cuda: FlashAttention's fp32
//                                log-sum-exp, 4 NH (it recomputes the rest);
//     under tp the 12 C-wide tensors of the heads and the MLP and the
//     attention terms are split over tp, and with sequence parallelism the
//     other 4 as well; with --recompute only each block's input stays (C
//     elements) plus one block's activations at a time;
//     under cp a rank keeps tokens / cp of them, and its attention also
//     the keys and values of all tokens, gathered (2 C / tp per token of
//     the sequence) and the probabilities against all keys on the cpu;
//     + 8 C for the embedding and the final layernorm, + the head's own
//     (GPT-2: fp32 logits and their softmax, 8 V / tp; ViT: about 22 bytes per
//     pixel value of the patches in and the fields out).
// tests/models/test_memory_plan.cpp holds these against the allocator's
// measured peak.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/device.h"
#include "engine/precision.h"

namespace eng::models {

struct BlockStack {
  int64_t layers = 0, tokens = 0, width = 0, heads = 0;
  int64_t tp = 1;
  bool sequence_parallel = false, recompute = false;
  int64_t cp = 1;  // context parallel: tokens / cp per rank, plus the gathered keys and values
};

// Bytes the forward keeps for the backward per sample (`tokens` of them),
// `head_bytes_per_token` for what follows the blocks (logits, output fields).
double activation_bytes_per_sample(const BlockStack& s, Device dev, Precision p, double head_bytes_per_token);

struct MemoryPlan {
  size_t state_bytes = 0;  // weights, gradients and optimizer state of this rank
  double activations_per_sample = 0;
  int64_t micro = 0;      // samples per micro-batch
  int64_t in_flight = 1;  // micro-batches whose activations are held at once (a pipeline stage: up to pp, or m)
  size_t planned() const { return state_bytes + size_t(activations_per_sample * double(micro * in_flight)); }
};

// The state of `params` parameters at precision p, the optimizer's state
// (optimizer_bytes per parameter: 8 for AdamW's moments) split
// over `optimizer_shards` ranks (ZeRO-1) or not (1).
size_t state_bytes(int64_t params, Precision p, int64_t optimizer_shards, double optimizer_bytes = 8.0);

// Every rank (a collective): compares its plan with its device's free memory
// (or limit_gb, when > 0; limit_gb < 0 skips the check), host memory shared
// by the ranks of a node, with 6% to spare. On the host it first has the
// compute threads take their address space (cpu::warm_threads), refusing a
// ulimit -v that cannot hold it, so the figure counts it. Returns rank 0's one-line summary; throws
// WorldError on every rank, naming the first rank that does not fit, the
// figures and the largest batch_size that does.
std::string check_memory_plan(const MemoryPlan& plan, Device dev, double limit_gb);

}  // namespace eng::models
