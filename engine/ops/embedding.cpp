// Embedding lookup; ids are checked against the vocabulary before any read.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"

namespace eng {
using namespace detail;

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const DType t = check_float_inputs("embedding", {weight});
  ENGINE_CHECK(weight.ndim() == 2, "embedding: weight must be (V, C), got ", weight.desc());
  check_ids("embedding", ids, weight);
  const int64_t V = weight.size(0), C = weight.size(1), n = ids.numel();
  const int32_t* id = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(id[i] >= 0 && id[i] < V, "embedding: id ", id[i], " at position ", i, " outside the vocabulary [0, ",
                 V, ")");
  Shape os = ids.shape();
  os.push_back(C);
  Tensor out = Tensor::empty(os, t, weight.device());
  dispatch_float(t, [&]<typename T>() { cpu::embedding_forward(weight.data<T>(), id, out.data<T>(), n, C); });
  Tensor sids = needs_record({weight}) ? ids : Tensor();
  record("embedding", out, {weight}, [sids, V, C, n](const Tensor& g, const std::vector<bool>&) {
    Tensor dw = Tensor::empty({V, C}, g.dtype(), g.device());
    dispatch_float(g.dtype(), [&]<typename T>() {
      cpu::embedding_backward(g.data<T>(), sids.data<int32_t>(), dw.data<T>(), n, V, C);
    });
    return std::vector<Tensor>{dw};
  });
  return out;
}

}  // namespace eng
