// Decoding one sequence token by token with a KV cache: each layer keeps the
// keys and values of every position so far, so a new token costs one row
// through the blocks (its q attends to the cached keys, q_offset = its
// position) instead of the whole window again. GPT-2's positions are
// learned and absolute: once the sequence is longer than block_size the
// window slides and every cached key would have to move a position, so from
// there each token re-reads the last block_size tokens into the cache
// (exactly what the full-window path computes, at its cost).
// fp32, one sequence, the model's device (cpu, emu, cuda); our attention
// kernels (the cache is a strided view cuDNN's fused path does not take).
// Memory: 2 x n_layer x block_size x n_embd floats (GPT-2 124M: 72 MiB).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "models/gpt2/gpt2.h"

namespace eng::models {

class KvDecoder {
 public:
  // kv_cache false: every call reruns the whole window (the reference path).
  explicit KvDecoder(const GPT2& model, bool kv_cache = true);
  // Appends ids to the sequence; returns the V logits of the token after them.
  std::vector<float> append(const std::vector<int32_t>& ids);
  int64_t length() const { return int64_t(seq_.size()); }
  int64_t cached() const { return cached_; }  // positions the cache holds

 private:
  // Runs ids at positions cached_ .. cached_ + n - 1 through the blocks,
  // adding their keys and values to the cache; the last row's logits.
  std::vector<float> extend(const std::vector<int32_t>& ids);

  const GPT2& model_;
  bool use_cache_;
  std::vector<Tensor> k_, v_;  // per layer: (block_size, n_embd), rows [0, cached_) valid
  std::vector<int32_t> seq_;
  int64_t cached_ = 0;
};

}  // namespace eng::models
