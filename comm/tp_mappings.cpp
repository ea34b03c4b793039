// The tp mappings (tp_mappings.h): four data moves, each used as a forward
// and as another op's backward, and the autograd nodes that pair them.
#include "comm/tp_mappings.h"

#include "base/error.h"
#include "engine/autograd.h"
#include "engine/ops.h"

namespace eng::comm {

namespace {

// The data moves, never recorded (the ops below record their own node).
Tensor all_reduced(const Tensor& x, Communicator& c) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  c.all_reduce(x, out, ReduceOp::sum).wait();
  return out;
}

int64_t shard_of(const char* op, const Tensor& x, int dim, const Communicator& c) {
  const int64_t n = x.size(dim);
  ENGINE_CHECK(n % c.size() == 0, op, ": dim ", dim, " of ", x.desc(), " does not divide by tp ", c.size());
  return n / c.size();
}

Tensor my_slice(const char* op, const Tensor& x, int dim, const Communicator& c) {
  NoGradGuard no_grad;
  const int64_t n = shard_of(op, x, dim, c);
  return narrow(x, dim, c.rank() * n, n);
}

// Every rank's x side by side along dim -1 (rank order).
Tensor gathered_last(const Tensor& x, Communicator& c) {
  NoGradGuard no_grad;
  const int P = c.size();
  const int64_t cols = x.ndim() ? x.size(-1) : 1, rows = cols ? x.numel() / cols : 0;
  Tensor buf = Tensor::empty({P * rows, cols}, x.dtype(), x.device());
  c.all_gather(x, buf).wait();
  // buf holds rank r's (rows, cols) block at rows [r rows, (r + 1) rows).
  std::vector<Tensor> blocks;
  for (int r = 0; r < P; ++r) blocks.push_back(buf.slice(r * rows, (r + 1) * rows));
  Shape os = x.shape();
  os.back() = P * cols;
  return concat(blocks, 1).reshape(os);
}

// Every rank's x stacked along dim 0 (rank order).
Tensor gathered_rows(const Tensor& x, Communicator& c) {
  Shape os = x.shape();
  os[0] *= c.size();
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  c.all_gather(x, out).wait();
  return out;
}

// My block of dim 0 of the sum over ranks.
Tensor reduce_scattered_rows(const char* op, const Tensor& x, Communicator& c) {
  Shape os = x.shape();
  os[0] = shard_of(op, x, 0, c);
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  c.reduce_scatter(x, out, ReduceOp::sum).wait();
  return out;
}

void check_rows(const char* op, const Tensor& x) {
  ENGINE_CHECK(x.ndim() >= 1, op, ": needs a tensor with a dim 0 of token rows, got ", x.desc());
}

// Attaches `name`'s backward to out (a new tensor) and returns it.
Tensor with_backward(const char* name, Tensor out, const Tensor& x, BackwardFn fn) {
  record(name, out, {x}, std::move(fn));
  return out;
}

}  // namespace

Tensor copy_to_tp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  Communicator* c = &tp;
  return with_backward("copy_to_tp", x.detach(), x, [c](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{all_reduced(g, *c)};
  });
}

Tensor reduce_from_tp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  return with_backward("reduce_from_tp", all_reduced(x, tp), x,
                       [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
}

Tensor scatter_to_tp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  ENGINE_CHECK(x.ndim() >= 1, "scatter_to_tp: needs a tensor with a last dim, got ", x.desc());
  Communicator* c = &tp;
  return with_backward(
      "scatter_to_tp", my_slice("scatter_to_tp", x, -1, tp), x,
      [c](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{gathered_last(g, *c)}; });
}

Tensor gather_from_tp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  ENGINE_CHECK(x.ndim() >= 1, "gather_from_tp: needs a tensor with a last dim, got ", x.desc());
  Communicator* c = &tp;
  return with_backward("gather_from_tp", gathered_last(x, tp), x, [c](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{my_slice("gather_from_tp backward", g, -1, *c)};
  });
}

Tensor gather_from_sp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  check_rows("gather_from_sp", x);
  Communicator* c = &tp;
  return with_backward("gather_from_sp", gathered_rows(x, tp), x, [c](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{reduce_scattered_rows("gather_from_sp backward", g, *c)};
  });
}

Tensor reduce_scatter_to_sp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  check_rows("reduce_scatter_to_sp", x);
  Communicator* c = &tp;
  return with_backward(
      "reduce_scatter_to_sp", reduce_scattered_rows("reduce_scatter_to_sp", x, tp), x,
      [c](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{gathered_rows(g, *c)}; });
}

Tensor scatter_to_sp(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  check_rows("scatter_to_sp", x);
  Communicator* c = &tp;
  return with_backward(
      "scatter_to_sp", my_slice("scatter_to_sp", x, 0, tp), x,
      [c](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{gathered_rows(g, *c)}; });
}

Tensor gather_from_sp_to_replicated(const Tensor& x, Communicator& tp) {
  if (tp.size() == 1) return x;
  check_rows("gather_from_sp_to_replicated", x);
  Communicator* c = &tp;
  return with_backward("gather_from_sp_to_replicated", gathered_rows(x, tp), x,
                       [c](const Tensor& g, const std::vector<bool>&) {
                         return std::vector<Tensor>{my_slice("gather_from_sp_to_replicated backward", g, 0, *c)};
                       });
}

}  // namespace eng::comm
