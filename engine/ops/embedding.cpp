// Embedding lookup; ids are checked against the vocabulary before any read.
// On emu/cuda the backward is deterministic: the host buckets the token
// positions by id (a stable counting sort, O(n + V)) and the kernel gathers
// each row of dw from its bucket in position order (kernels/cuda/embedding.cu).
#include <vector>

#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/embedding.h"

namespace eng {
using namespace detail;

// Positions grouped by id in CSR form: the positions of id v are
// order[row_start[v] .. row_start[v + 1]), increasing (the sort is stable).
static void bucket_by_id(const int32_t* ids, int64_t n, int64_t V, std::vector<int32_t>& order,
                         std::vector<int32_t>& row_start) {
  row_start.assign(size_t(V + 1), 0);
  for (int64_t i = 0; i < n; ++i) ++row_start[size_t(ids[i]) + 1];
  for (int64_t v = 0; v < V; ++v) row_start[size_t(v + 1)] += row_start[size_t(v)];
  std::vector<int32_t> next(row_start.begin(), row_start.end() - 1);
  order.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(ids[i])]++)] = int32_t(i);
}

static Tensor embedding_gpu(const Tensor& weight, const Tensor& ids, const Tensor& h_ids, Shape os) {
  const int64_t V = weight.size(0), C = weight.size(1), n = ids.numel();
  Tensor out = Tensor::empty(os, weight.dtype(), weight.device());
  ENGINE_GPU_CALL(weight.device(), embedding_forward, storage_of(weight.dtype()), weight.data_ptr(),
                  ids.data<int32_t>(), out.data_ptr(), n, C, nullptr);
  Tensor sids = needs_record({weight}) ? h_ids : Tensor();
  record("embedding", out, {weight}, [sids, V, C, n](const Tensor& g, const std::vector<bool>&) {
    std::vector<int32_t> order, row_start;
    bucket_by_id(sids.data<int32_t>(), n, V, order, row_start);
    const Tensor d_order = Tensor::from_ints(order, {n}, g.device());
    const Tensor d_row_start = Tensor::from_ints(row_start, {V + 1}, g.device());
    Tensor dw = Tensor::empty({V, C}, g.dtype(), g.device());
    ENGINE_GPU_CALL(g.device(), embedding_backward, storage_of(g.dtype()), g.data_ptr(), d_order.data<int32_t>(),
                    d_row_start.data<int32_t>(), dw.data_ptr(), V, C, nullptr);
    return std::vector<Tensor>{dw};
  });
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const DType t = check_float_inputs("embedding", {weight}, GpuKernel::yes);
  ENGINE_CHECK(weight.ndim() == 2, "embedding: weight must be (V, C), got ", weight.desc());
  check_ids("embedding", ids, weight);
  const int64_t V = weight.size(0), C = weight.size(1), n = ids.numel();
  ENGINE_CHECK(n < (int64_t(1) << 31), "embedding: ", n, " ids do not fit the int32 positions of the backward");
  // Checked on the host: emu memory is host memory; cuda ids are copied back.
  const Tensor h_ids = ids.device().type == DeviceType::cuda ? ids.to(kCPU) : ids;
  const int32_t* id = h_ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    ENGINE_CHECK(id[i] >= 0 && id[i] < V, "embedding: id ", id[i], " at position ", i, " outside the vocabulary [0, ",
                 V, ")");
  Shape os = ids.shape();
  os.push_back(C);
  if (on_gpu(weight)) return embedding_gpu(weight, ids, h_ids, os);
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
