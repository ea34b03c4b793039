// matmul (2-D and batched, either operand transposed, optional bias) and linear.
// For C = op(A) op(B) + bias, with G = dL/dC:
//   dA = G op(B)^T      (stored transposed again when ta = T: dA = op(B) G^T)
//   dB = op(A)^T G      (when tb = T: dB = G^T op(A))
//   dbias = column sums of G
// A shared 2-D B with a batched A is folded into one big GEMM over all rows,
// which is how Linear on (B, T, C) activations becomes a single call.
#include "engine/ops/op_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/gemm/gemm.h"

namespace eng {
using namespace detail;

namespace {
struct MatmulDims {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool shared_b = false;  // B is 2-D and used by every batch
  Shape out_shape;
};

MatmulDims matmul_dims(const Tensor& a, const Tensor& b, Trans ta, Trans tb) {
  ENGINE_CHECK(a.ndim() >= 2 && b.ndim() >= 2, "matmul: need at least 2-D operands, got ", a.desc(), " @ ", b.desc());
  MatmulDims d;
  const int64_t ar = a.size(-2), ac = a.size(-1), br = b.size(-2), bc = b.size(-1);
  d.M = ta == Trans::N ? ar : ac;
  d.K = ta == Trans::N ? ac : ar;
  const int64_t kb = tb == Trans::N ? br : bc;
  d.N = tb == Trans::N ? bc : br;
  ENGINE_CHECK(d.K == kb, "matmul: inner dimensions differ (", d.K, " vs ", kb, "): ", a.desc(),
               ta == Trans::T ? "^T" : "", " @ ", b.desc(), tb == Trans::T ? "^T" : "");
  Shape lead(a.shape().begin(), a.shape().end() - 2);
  d.batch = shape_numel(lead);
  if (b.ndim() == 2) {
    d.shared_b = true;
  } else {
    Shape blead(b.shape().begin(), b.shape().end() - 2);
    ENGINE_CHECK(blead == lead, "matmul: batch dimensions differ: ", a.desc(), " @ ", b.desc());
  }
  d.out_shape = lead;
  d.out_shape.push_back(d.M);
  d.out_shape.push_back(d.N);
  return d;
}

// C[batch] = op(A) op(B) with beta = 0, handling the shared-B fold.
template <typename T>
void run_gemm(const MatmulDims& d, Trans ta, Trans tb, const T* A, const T* B, T* C) {
  const int64_t lda = ta == Trans::N ? d.K : d.M, ldb = tb == Trans::N ? d.N : d.K;
  if (d.shared_b && ta == Trans::N) {
    cpu::gemm<T>(ta, tb, d.batch * d.M, d.N, d.K, T(1), A, lda, B, ldb, T(0), C, d.N);
  } else {
    cpu::gemm_batched<T>(ta, tb, d.M, d.N, d.K, T(1), A, lda, d.M * d.K, B, ldb, d.shared_b ? 0 : d.K * d.N, T(0), C,
                         d.N, d.M * d.N, d.batch);
  }
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, Trans ta, Trans tb, const Tensor& bias) {
  const DType t = bias.defined() ? check_float_inputs("matmul", {a, b, bias}) : check_float_inputs("matmul", {a, b});
  const MatmulDims d = matmul_dims(a, b, ta, tb);
  if (bias.defined())
    ENGINE_CHECK(bias.ndim() == 1 && bias.size(0) == d.N, "matmul: bias ", bias.desc(), " does not match ", d.N,
                 " output columns of ", a.desc(), " @ ", b.desc());
  Tensor out = Tensor::empty(d.out_shape, t, a.device());
  dispatch_float(t, [&]<typename T>() {
    run_gemm<T>(d, ta, tb, a.data<T>(), b.data<T>(), out.data<T>());
    if (bias.defined()) cpu::bias_add<T>(out.data<T>(), bias.data<T>(), d.batch * d.M, d.N);
  });
  const bool rec = needs_record({a, b, bias});
  Tensor sa = rec ? a.detach() : Tensor(), sb = rec ? b.detach() : Tensor();
  record("matmul", out, {a, b, bias}, [sa, sb, ta, tb, d](const Tensor& g, const std::vector<bool>& needs) {
    std::vector<Tensor> grads(3);
    dispatch_float(g.dtype(), [&]<typename T>() {
      const T* G = g.data<T>();
      if (needs[0]) {
        Tensor da = empty_like(sa);
        // dA (as stored) = G op(B)^T, or op(B) G^T when A was transposed.
        MatmulDims e = d;
        if (ta == Trans::N) {
          e.M = d.M, e.N = d.K, e.K = d.N;
          run_gemm<T>(e, Trans::N, tb == Trans::N ? Trans::T : Trans::N, G, sb.data<T>(), da.data<T>());
        } else {
          // (K x M) = op(B) (K x N) @ G^T (N x M): batched, B first.
          e.M = d.K, e.N = d.M, e.K = d.N;
          const T* B = sb.data<T>();
          const int64_t ldb = tb == Trans::N ? d.N : d.K;
          cpu::gemm_batched<T>(tb, Trans::T, e.M, e.N, e.K, T(1), B, ldb, d.shared_b ? 0 : d.K * d.N, G, d.N, d.M * d.N,
                               T(0), da.data<T>(), d.M, d.M * d.K, d.batch);
        }
        grads[0] = da;
      }
      if (needs[1]) {
        Tensor db = empty_like(sb);
        const T* A = sa.data<T>();
        const int64_t lda = ta == Trans::N ? d.K : d.M;
        // Shared B sums over the batch: with beta = 1 each batch adds its part.
        const int64_t nb = d.shared_b ? 1 : d.batch;
        const int64_t inner = d.shared_b ? d.batch : 1;  // batches folded into one sum
        if (tb == Trans::N) {                            // dB (K x N) = op(A)^T G
          if (d.shared_b && ta == Trans::N) {
            cpu::gemm<T>(Trans::T, Trans::N, d.K, d.N, d.batch * d.M, T(1), A, lda, G, d.N, T(0), db.data<T>(), d.N);
          } else {
            for (int64_t i = 0; i < inner; ++i)
              cpu::gemm_batched<T>(ta == Trans::N ? Trans::T : Trans::N, Trans::N, d.K, d.N, d.M, T(1),
                                   A + i * d.M * d.K, lda, d.M * d.K, G + i * d.M * d.N, d.N, d.M * d.N, T(i ? 1 : 0),
                                   db.data<T>(), d.N, d.K * d.N, nb);
          }
        } else {  // dB (N x K) = G^T op(A)
          if (d.shared_b && ta == Trans::N) {
            cpu::gemm<T>(Trans::T, Trans::N, d.N, d.K, d.batch * d.M, T(1), G, d.N, A, lda, T(0), db.data<T>(), d.K);
          } else {
            for (int64_t i = 0; i < inner; ++i)
              cpu::gemm_batched<T>(Trans::T, ta, d.N, d.K, d.M, T(1), G + i * d.M * d.N, d.N, d.M * d.N,
                                   A + i * d.M * d.K, lda, d.M * d.K, T(i ? 1 : 0), db.data<T>(), d.K, d.K * d.N, nb);
          }
        }
        grads[1] = db;
      }
      if (needs[2]) {
        Tensor dbias = Tensor::empty({d.N}, g.dtype(), g.device());
        cpu::bias_backward<T>(G, dbias.data<T>(), d.batch * d.M, d.N);
        grads[2] = dbias;
      }
    });
    return grads;
  });
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  ENGINE_CHECK(w.ndim() == 2, "linear: weight must be (out, in), got ", w.desc());
  ENGINE_CHECK(x.ndim() >= 1 && x.size(-1) == w.size(1), "linear: input ", x.desc(), " does not match weight ",
               w.desc());
  if (x.ndim() == 1) return matmul(x.reshape({1, x.size(0)}), w, Trans::N, Trans::T, b).reshape({w.size(0)});
  return matmul(x, w, Trans::N, Trans::T, b);
}

}  // namespace eng
