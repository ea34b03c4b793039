// Text samples from a language model split over tp, cp and pp (GPT2Tp,
// LlamaTp: the same stage_forward / forward / stage_rows / tp()): the logits
// of one window on the host, every rank of the model's group taking part.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "comm/cp_mappings.h"
#include "comm/tp_mappings.h"
#include "engine/ops.h"
#include "models/train/pipeline_step.h"
#include "models/train/task.h"

namespace eng::models {

// The T x V logits of `window` (T <= block_size ids), row-major. Sequence
// parallel needs T rows divisible by tp, context parallel by cp: the window
// is padded on the right (causal: later positions change nothing before
// them), or, at the full context, its oldest few tokens dropped (their rows
// stay 0; the sampler reads the last row only). Our attention always (as
// the serial models' samples).
template <class SplitModel>
std::vector<float> split_logits(const SplitModel& m, const ModelGrid& mg, PipelineStep* pipe, bool sequence_parallel,
                                int64_t block_size, int64_t V, const std::vector<int32_t>& window, Device dev) {
  const int64_t T = int64_t(window.size());
  const int64_t P = (sequence_parallel ? mg.tp_size() : 1) * mg.cp_size(), Tp = (T + P - 1) / P * P;
  std::vector<int32_t> w = window;
  const int64_t drop = Tp > block_size ? T % P : 0;
  if (drop > 0)
    w.erase(w.begin(), w.begin() + drop);
  else
    w.resize(size_t(Tp), 0);
  Tensor ids = Tensor::from_ints(w, {1, int64_t(w.size())});
  if (mg.cp) ids = comm::cp_slice(ids, 1, *mg.cp);  // my positions
  ids = ids.to(dev);
  Tensor mine;  // (my rows, my vocabulary shard): the last stage's
  if (pipe) {
    const auto outs =
        pipe->forward_only(1,
                           [&](int64_t, const Tensor& in) {
                             return m.stage_forward(in, ids, Recompute::no, Autocast(), AttentionImpl::ours);
                           },
                           {m.stage_rows(1, ids.size(1)), DType::f32});
    if (!outs.empty()) mine = outs[0];
  } else {
    mine = m.forward(ids, Recompute::no, Autocast(), AttentionImpl::ours);
  }
  std::vector<float> out(size_t(T * V), 0.f);
  if (mine.defined()) {
    Tensor all = comm::gather_from_tp(mine, m.tp());     // (my rows, padded vocabulary)
    if (mg.cp) all = comm::gather_from_sp(all, *mg.cp);  // every cp rank's rows, in order
    const std::vector<float> got = narrow(all, 1, 0, V).to_vector();
    const int64_t rows = T - drop;  // the real rows, which end at the last token
    std::copy(got.begin(), got.begin() + rows * V, out.begin() + drop * V);
  }
  if (pipe) {  // the last stage's logits to every stage, which all draw the same token
    Tensor t = Tensor::from_vector(out, {T * V}, DType::f32, dev);
    mg.pp->broadcast(t, mg.pp_size() - 1).wait();
    out = t.to_vector();
  }
  return out;
}

}  // namespace eng::models
