// The global gradient norm under tensor parallelism (tp_grads.h).
#include "models/train/tp_grads.h"

#include <cmath>

#include "engine/ops.h"
#include "engine/optim/optimizer.h"

namespace eng::models {

Tensor tp_clip_coefficient(const TpGrads& g, double max_norm) {
  const Device dev = g.tp->device();
  Tensor ss = grad_sum_squares(g.sharded, dev).clone();
  g.tp->all_reduce(ss, comm::ReduceOp::sum).wait();
  add_(ss, grad_sum_squares(g.replicated, dev));
  return clip_coefficient_from(ss, max_norm);
}

double tp_clip_grad_norm(const TpGrads& g, double max_norm) {
  const double mine = grad_norm(g.sharded);
  Tensor ss = Tensor::full({1}, mine * mine, DType::f64);
  g.tp->all_reduce(ss, comm::ReduceOp::sum).wait();
  const double rep = grad_norm(g.replicated);
  const double norm = std::sqrt(ss.to_f64_vector()[0] + rep * rep);
  if (max_norm > 0 && max_norm / (norm + 1e-6) < 1.0)
    for (const std::vector<Tensor>* ps : {&g.sharded, &g.replicated})
      for (const Tensor& p : *ps) {
        Tensor gr = p.grad();
        if (gr.defined()) scale_(gr, max_norm / (norm + 1e-6));
      }
  return norm;
}

namespace {
std::vector<Tensor> without(const std::vector<Tensor>& ps, const std::vector<Tensor>& drop) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) {
    bool dropped = false;
    for (const Tensor& d : drop) dropped = dropped || d.same(p);
    if (!dropped) out.push_back(p);
  }
  return out;
}
// The sum of a host double over a communicator (on its device).
double sum_over(comm::Communicator& c, double x) {
  Tensor t = Tensor::full({1}, x, DType::f64, c.device());
  c.all_reduce(t, comm::ReduceOp::sum).wait();
  return t.to_f64_vector()[0];
}
double squared(double x) { return x * x; }
}  // namespace

double pipeline_clip_grad_norm(const std::vector<Tensor>& params, const TpGrads& g,
                               const std::vector<Tensor>& uncounted, comm::Communicator& pp, double max_norm) {
  double ss = 0;
  if (g.active())
    ss = sum_over(*g.tp, squared(grad_norm(without(g.sharded, uncounted)))) +
         squared(grad_norm(without(g.replicated, uncounted)));
  else
    ss = squared(grad_norm(without(params, uncounted)));
  const double norm = std::sqrt(sum_over(pp, ss));
  if (max_norm > 0 && max_norm / (norm + 1e-6) < 1.0)
    for (const Tensor& p : params) {
      Tensor gr = p.grad();
      if (gr.defined()) scale_(gr, max_norm / (norm + 1e-6));
    }
  return norm;
}

Tensor pipeline_clip_coefficient(const std::vector<Tensor>& params, const TpGrads& g,
                                 const std::vector<Tensor>& uncounted, comm::Communicator& pp, double max_norm) {
  const Device dev = pp.device();
  Tensor ss;
  if (g.active()) {
    ss = grad_sum_squares(without(g.sharded, uncounted), dev).clone();
    g.tp->all_reduce(ss, comm::ReduceOp::sum).wait();
    add_(ss, grad_sum_squares(without(g.replicated, uncounted), dev));
  } else {
    ss = grad_sum_squares(without(params, uncounted), dev).clone();
  }
  pp.all_reduce(ss, comm::ReduceOp::sum).wait();
  return clip_coefficient_from(ss, max_norm);
}

}  // namespace eng::models
