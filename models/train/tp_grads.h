// Gradients under tensor parallelism: what a training step does between the
// backward and the optimizer when the model is split over a tp group.
//  - Partial gradients (sequence parallel: layernorms, row biases) are summed
//    over tp (the model's sync_partial_grads).
//  - The global norm for clipping counts every parameter once: the sharded
//    parameters' sums of squares are summed over tp, the replicated ones
//    (the same on every tp rank) are added once.
#pragma once
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "engine/tensor.h"

namespace eng::models {

struct TpGrads {
  comm::Communicator* tp = nullptr;         // null: no tensor parallelism
  std::vector<Tensor> sharded, replicated;  // every parameter in one of the two
  std::vector<Tensor> partial;              // replicated ones whose gradients are partial (sequence parallel)
  std::function<void()> sync_partial;       // sums their gradients over tp (without ZeRO; ZeRO does it in its shard)
  bool active() const { return tp != nullptr; }
};

// emu/cuda: {norm, factor} on the device (as clip_coefficient), capturable.
Tensor tp_clip_coefficient(const TpGrads& g, double max_norm);
// cpu: the same norm, and the gradients scaled by the factor (as
// clip_grad_norm); returns the norm before clipping.
double tp_clip_grad_norm(const TpGrads& g, double max_norm);
// Pipeline parallel, any device, eager: the global norm over every stage.
// Each stage's sum of squares (under tp by the rule above), leaving out
// `uncounted` (the last stage's copy of a tied parameter, whose gradient
// equals the first stage's), summed over pp; then every gradient of
// `params` scaled as clip_grad_norm does. Returns the norm before clipping.
double pipeline_clip_grad_norm(const std::vector<Tensor>& params, const TpGrads& g,
                               const std::vector<Tensor>& uncounted, comm::Communicator& pp, double max_norm);
// emu/cuda: the same norm as {norm, factor} on the device, without a host
// read (as clip_coefficient; capturable). The gradients are not changed.
Tensor pipeline_clip_coefficient(const std::vector<Tensor>& params, const TpGrads& g,
                                 const std::vector<Tensor>& uncounted, comm::Communicator& pp, double max_norm);

}  // namespace eng::models
