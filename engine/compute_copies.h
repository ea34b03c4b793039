// Compute-dtype copies of fp32 master weights, kept between training steps
// (docs/precision.md, "The weights' bf16 copies"). At O2/O3 each forward
// casts every weight to bf16 before its GEMM or layernorm: a launch and 6
// bytes a parameter (148 launches in a GPT-2 124M step). With a
// ComputeCopies attached to the Autocast, a weight's first cast makes a
// persistent copy, and the fused AdamW rewrites that copy from the same
// register as it updates the master (AdamWTensor::param_bf16: 2 bytes a
// parameter, no launch of its own), so later forwards read the copy as it
// is. Gradients still flow back to the master in fp32, and the copy holds
// exactly what the cast would (both round to nearest even).
// Valid only while that AdamW is the only writer of the masters after the
// first use: train attaches it for bf16 compute with the fused AdamW on
// emu/cuda, not under ZeRO (which steps shards and gathers the masters),
// loss scaling or the other optimizers.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/tensor.h"

namespace eng {

class ComputeCopies {
 public:
  // The masters that may have copies (a model's parameters); bf16 copies.
  explicit ComputeCopies(const std::vector<Tensor>& masters);
  // Whether x is one of the masters.
  bool holds(const Tensor& x) const;
  // The copy of `master` with `rows` rows (its own, then zero rows: a table
  // padded for aligned GEMMs), made by a cast on its first use. Not during a
  // CUDA graph capture (the copy must outlive the graph's pool).
  const Tensor& get(const Tensor& master, int64_t rows);
  // The copy for the optimizer to write `master`'s update into, or nullptr.
  void* written_by_optimizer(const Tensor& master) const;
  int64_t bytes() const;  // held by the copies made so far

 private:
  std::unordered_map<const TensorImpl*, Tensor> copies_;  // made so far
  std::unordered_set<const TensorImpl*> masters_;
};

}  // namespace eng
