// Embedding lookup; ids are checked against the vocabulary before any read.
// On emu/cuda the backward is deterministic: the positions are bucketed by
// id on the device (kernels/cuda/bucket_by_id.cu: a stable radix sort, a
// pure function of the ids) and the kernel gathers each row of dw from its
// bucket in position order (kernels/cuda/embedding.cu). Nothing goes
// through the host, so a CUDA graph of the training step redoes the
// bucketing for every new batch with kernels alone. (It was a host node
// between two copies, the stream stopped while the host sorted: 0.2 ms of
// sorting at B 64, and the H200's eager events put the host nodes at 1.4 ms
// a micro-step.)
// When the table already has a gradient (tied weights, micro-batches), the
// backward adds into it, to the rows used only (take_leaf_grad).
#include "kernels/cuda/embedding.h"
#include "engine/graph.h"
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/bucket_by_id.h"
#include "kernels/cuda/gemm.h"

namespace eng {
using namespace detail;

static void check_id_range(const char* op, const Tensor& ids, int64_t V) {
  const Tensor h_ids = ids.device().type == DeviceType::cuda ? ids.to(kCPU) : ids;
  const int32_t* id = h_ids.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    ENGINE_CHECK(id[i] >= 0 && id[i] < V, op, ": id ", id[i], " at position ", i, " outside the vocabulary [0, ", V,
                 ")");
}

// The gradient of input 0, a (V, C) table in table_t, from g (n rows of C)
// on emu/cuda: the positions bucketed by id on the device, then each row of
// the table gathered from its bucket. A table that already holds a gradient
// (tied to the lm_head, whose backward ran first; an earlier micro-batch's)
// gets this one added in place, to the rows the ids name only
// (take_leaf_grad): no (V, C) tensor, no zero rows written, no add over the
// whole table.
static Tensor table_grad_gpu(const char* op, const Tensor& g, const Tensor& sids, int64_t V, int64_t C, int64_t n,
                             int64_t start, DType table_t) {
  const Device dev = g.device();
  Tensor d_order = Tensor::empty({n}, DType::i32, dev), d_start = Tensor::empty({V + 1}, DType::i32, dev);
  Tensor work = Tensor::empty({gpu::bucket_workspace(n)}, DType::i32, dev);
  ENGINE_GPU_CALL(dev, bucket_by_id, sids.data<int32_t>(), n, start, V, d_order.data<int32_t>(),
                  d_start.data<int32_t>(), work.data<int32_t>(), nullptr);
  Tensor dw = take_leaf_grad(0);
  const bool accumulate = dw.defined() && dw.dtype() == table_t && dw.shape() == Shape{V, C};
  ENGINE_CHECK(accumulate || !dw.defined(), op, ": the table's gradient ", dw.desc(), " is not (", V, ", ", C, ") in ",
               dtype_name(table_t));
  if (!accumulate) dw = Tensor::empty({V, C}, table_t, dev);
  ENGINE_GPU_CALL(dev, embedding_backward, storage_of(g.dtype()), storage_of(table_t), g.data_ptr(),
                  d_order.data<int32_t>(), d_start.data<int32_t>(), dw.data_ptr(), accumulate, n, V, C, nullptr);
  return dw;
}

static Tensor embedding_gpu(const Tensor& weight, const Tensor& ids, Shape os, int64_t start) {
  const int64_t V = weight.size(0), C = weight.size(1), n = ids.numel();
  Tensor out = Tensor::empty(os, weight.dtype(), weight.device());
  ENGINE_GPU_CALL(weight.device(), embedding_forward, storage_of(weight.dtype()), weight.data_ptr(),
                  ids.data<int32_t>(), out.data_ptr(), n, C, start, V, nullptr);
  Tensor sids = needs_record({weight}) ? ids : Tensor();
  record("embedding", out, {weight}, [sids, V, C, n, start](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{table_grad_gpu("embedding", g, sids, V, C, n, start, g.dtype())};
  });
  return out;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  return embedding(weight, ids, VocabShard{0, weight.ndim() == 2 ? weight.size(0) : 0});
}

Tensor embedding(const Tensor& weight, const Tensor& ids, VocabShard shard) {
  const DType t = check_float_inputs("embedding", {weight}, GpuKernel::yes);
  ENGINE_CHECK(weight.ndim() == 2, "embedding: weight must be (V, C), got ", weight.desc());
  check_ids("embedding", ids, weight);
  const int64_t V = weight.size(0), C = weight.size(1), n = ids.numel(), start = shard.start;
  ENGINE_CHECK(start >= 0 && shard.vocab > 0, "embedding: shard start ", start, " of a vocabulary of ", shard.vocab);
  ENGINE_CHECK(n < (int64_t(1) << 31), "embedding: ", n, " ids do not fit the int32 positions of the backward");
  Shape os = ids.shape();
  os.push_back(C);
  if (on_gpu(weight)) {
    // Checked on the host: emu memory is host memory; cuda ids are copied
    // back. Not during a graph capture, where ids hold no batch yet: a
    // captured step checks its batches on the host before uploading them.
    if (!capturing()) check_id_range("embedding", ids, shard.vocab);
    return embedding_gpu(weight, ids, os, start);
  }
  check_id_range("embedding", ids, shard.vocab);
  const int32_t* id = ids.data<int32_t>();
  Tensor out = Tensor::empty(os, t, weight.device());
  dispatch_float(t, [&]<typename T>() { cpu::embedding_forward(weight.data<T>(), id, out.data<T>(), n, C, start, V); });
  Tensor sids = needs_record({weight}) ? ids : Tensor();
  record("embedding", out, {weight}, [sids, V, C, n, start](const Tensor& g, const std::vector<bool>&) {
    Tensor dw = Tensor::empty({V, C}, g.dtype(), g.device());
    dispatch_float(g.dtype(), [&]<typename T>() {
      cpu::embedding_backward(g.data<T>(), sids.data<int32_t>(), dw.data<T>(), n, V, C, start);
    });
    return std::vector<Tensor>{dw};
  });
  return out;
}

Tensor add_positions(const Tensor& x, const Tensor& table, int64_t first, DType out_dtype) {
  const DType t = check_float_inputs("add_positions", {x, table}, GpuKernel::yes);
  ENGINE_CHECK(x.ndim() == 3 && table.ndim() == 2 && table.size(1) == x.size(2), "add_positions: x ", x.desc(),
               " must be (B, T, C) and the table (P, C), got ", table.desc());
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), P = table.size(0);
  ENGINE_CHECK(first >= 0 && first + T <= P, "add_positions: positions ", first, "..", first + T - 1,
               " outside the table's ", P, " rows");
  ENGINE_CHECK(out_dtype == t || (on_gpu(x) && dtype_size(out_dtype) == 2 && is_floating(out_dtype)),
               "add_positions: the sum in ", dtype_name(out_dtype), " of ", dtype_name(t),
               " inputs (a 16-bit compute dtype on emu/cuda only)");
  Tensor out = Tensor::empty(x.shape(), out_dtype, x.device());
  if (on_gpu(x)) {
    ENGINE_GPU_CALL(x.device(), add_positions_forward, storage_of(t), storage_of(out_dtype), x.data_ptr(),
                    table.data_ptr(), out.data_ptr(), B, T, C, first, nullptr);
  } else {
    dispatch_float(t, [&]<typename T_>() {
      cpu::add_positions_forward<T_>(x.data<T_>(), table.data<T_>() + first * C, out.data<T_>(), B, T, C);
    });
  }
  record("add_positions", out, {x, table}, [t, B, T, C, P, first](const Tensor& g, const std::vector<bool>& needs) {
    const Tensor dx = g.to(t);  // the fused cast's backward; g itself when no cast was fused
    Tensor dtable;
    if (needs[1]) {
      dtable = Tensor::empty({P, C}, t, g.device());
      if (P > T) fill_(dtable, 0.0);  // rows no position reached
      // Rows [first, first + T) = the sums over b of dx (B, T C): bias_backward's column sums.
      const size_t off = size_t(first * C) * dtype_size(t);
      void* rows = static_cast<char*>(dtable.data_ptr()) + off;
      if (on_gpu(g))
        ENGINE_GPU_CALL(g.device(), bias_backward, storage_of(t), dx.data_ptr(), rows, B, T * C, nullptr);
      else
        dispatch_float(t,
                       [&]<typename T_>() { cpu::bias_backward<T_>(dx.data<T_>(), static_cast<T_*>(rows), B, T * C); });
    }
    return std::vector<Tensor>{needs[0] ? dx : Tensor(), dtable};
  });
  return out;
}

// add_positions(embedding(w, ids), pos, first, out_dtype). On emu/cuda, with
// fp32 tables and a 16-bit sum (autocast's compute dtype), one kernel
// gathers, adds and casts: no (B, T, C) fp32 tensor written and read back,
// and the backward takes the 16-bit gradient into the tables' fp32
// gradients directly (no fp32 copy of it cast first and read again: at
// GPT-2's B 64 about 0.8 GB and two launches a micro-step). The token
// table's gradient as embedding's (bucketed, in position order; added into
// a gradient the table holds, to the rows used); the position table's as
// the column sums over b of the gradient (bias_grad, fp32 out, added into
// a gradient it holds). Elsewhere the composition itself.
Tensor embedding_positions(const Tensor& w, const Tensor& ids, const Tensor& pos, int64_t first, DType out_dtype) {
  const bool fused = on_gpu(w) && w.dtype() == DType::f32 && pos.dtype() == DType::f32 && dtype_size(out_dtype) == 2 &&
                     is_floating(out_dtype) && w.ndim() == 2 && pos.ndim() == 2 && ids.ndim() == 2 &&
                     pos.size(1) == w.size(1);
  if (!fused) return add_positions(embedding(w, ids), pos, first, out_dtype);
  check_float_inputs("embedding_positions", {w, pos}, GpuKernel::yes);
  check_ids("embedding_positions", ids, w);
  const int64_t V = w.size(0), C = w.size(1), B = ids.size(0), T = ids.size(1), n = ids.numel(), P = pos.size(0);
  ENGINE_CHECK(first >= 0 && first + T <= P, "embedding_positions: positions ", first, "..", first + T - 1,
               " outside the table's ", P, " rows");
  ENGINE_CHECK(n < (int64_t(1) << 31), "embedding_positions: ", n,
               " ids do not fit the int32 positions of the backward");
  // As embedding's: checked on the host, not during a capture (a captured
  // step checks its batches before uploading them).
  if (!capturing()) check_id_range("embedding_positions", ids, V);
  Tensor out = Tensor::empty({B, T, C}, out_dtype, w.device());
  ENGINE_GPU_CALL(w.device(), embedding_positions_forward, gpu::Storage::f32, storage_of(out_dtype), w.data_ptr(),
                  ids.data<int32_t>(), pos.data_ptr(), out.data_ptr(), n, T, C, 0, V, first, nullptr);
  Tensor sids = needs_record({w, pos}) ? ids : Tensor();
  record("embedding_positions", out, {w, pos},
         [sids, V, C, B, T, n, P, first](const Tensor& g, const std::vector<bool>& needs) {
           const Device dev = g.device();
           Tensor dw, dpos;
           if (needs[0]) dw = table_grad_gpu("embedding_positions", g, sids, V, C, n, 0, DType::f32);
           if (needs[1]) {
             dpos = take_leaf_grad(1);
             const bool add = dpos.defined() && dpos.dtype() == DType::f32 && dpos.shape() == Shape{P, C};
             ENGINE_CHECK(add || !dpos.defined(), "embedding_positions: the position table's gradient ", dpos.desc(),
                          " is not (", P, ", ", C, ") in f32");
             if (!add) {
               dpos = Tensor::empty({P, C}, DType::f32, dev);
               if (P > T) fill_(dpos, 0.0);  // rows no position reached
             }
             // Rows [first, first + T) = the sums over b of g (B, T C).
             column_sums_gpu(g, B, T * C, dpos.data<float>() + first * C, true, add);
           }
           return std::vector<Tensor>{dw, dpos};
         });
  return out;
}

}  // namespace eng
