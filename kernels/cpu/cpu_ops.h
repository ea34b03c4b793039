// Plain-loop CPU kernels: the reference every CUDA kernel is checked against,
// and the cpu device's real implementation (OpenMP where it pays).
// Conventions: T is float (training) or double (gradient checks); math is done
// in T; every output, including gradients, is written with = (autograd adds
// into .grad itself); all arrays are contiguous row-major.
// Each kernel's file states bytes moved and flops for T = float.
#pragma once
#include <array>
#include <cstdint>

namespace eng::cpu {

// elementwise.cpp
template <typename T>
void add(const T* a, const T* b, T* out, int64_t n);
template <typename T>
void sub(const T* a, const T* b, T* out, int64_t n);
template <typename T>
void mul(const T* a, const T* b, T* out, int64_t n);
template <typename T>
void scale(const T* x, T s, T* out, int64_t n);
template <typename T>
void axpy(T* dst, const T* src, T alpha, int64_t n);  // dst += alpha*src
template <typename T>
void fill(T* dst, T value, int64_t n);
// out[r, c] += bias[c] for rows x cols; bias_backward: db[c] = sum_r dout[r, c]
template <typename T>
void bias_add(T* out, const T* bias, int64_t rows, int64_t cols);
// out[r, c] = bias[c]: a GEMM's C before a beta = 1 product (the bias
// epilogue on the cpu, one write pass instead of BLAS's zeroing and bias_add's
// read and write).
template <typename T>
void bias_fill(T* out, const T* bias, int64_t rows, int64_t cols);
template <typename T>
void bias_backward(const T* dout, T* db, int64_t rows, int64_t cols);

// activation.cpp
template <typename T>
void gelu_forward(const T* x, T* out, int64_t n);
template <typename T>
void gelu_backward(const T* x, const T* dout, T* dx, int64_t n);
template <typename T>
void relu_forward(const T* x, T* out, int64_t n);
template <typename T>
void relu_backward(const T* x, const T* dout, T* dx, int64_t n);
// gu (N, 2H): rows [gate | up]; out (N, H) = silu(gate) * up; dgu like gu.
template <typename T>
void swiglu_forward(const T* gu, T* out, int64_t N, int64_t H);
template <typename T>
void swiglu_backward(const T* gu, const T* dout, T* dgu, int64_t N, int64_t H);

// layernorm.cpp: x (N, C); mean/rstd (N) saved for backward.
template <typename T>
void layernorm_forward(const T* x, const T* w, const T* b, T* out, T* mean, T* rstd, int64_t N, int64_t C, double eps);
template <typename T>
void layernorm_backward(const T* dout, const T* x, const T* w, const T* mean, const T* rstd, T* dx, T* dw, T* db,
                        int64_t N, int64_t C);

// rmsnorm.cpp: x (N, C); rstd (N) saved for backward.
template <typename T>
void rmsnorm_forward(const T* x, const T* w, T* out, T* rstd, int64_t N, int64_t C, double eps);
template <typename T>
void rmsnorm_backward(const T* dout, const T* x, const T* w, const T* rstd, T* dx, T* dw, int64_t N, int64_t C);

// rope.cpp: rotary embedding of the first `rot` heads of every (b, t) row
// of x (rows ld apart), the next `copy` heads copied; positions pos_offset
// + t of table (P, HS) (cos | sin per pair). direction +1: forward, -1: the
// backward's inverse turn. out may be x (in place; then copy is 0).
struct RopeDims {
  int64_t B = 0, T = 0, HS = 0, ld = 0, rot = 0, copy = 0, pos_offset = 0;
};
template <typename T>
void rope_apply(const T* x, T* out, const float* table, const RopeDims& d, int direction);

// softmax.cpp: rows of length C; with causal, row r is query (r % T) of a
// (T, T) block and keys j > query are masked to probability 0 (C == T).
template <typename T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t C, bool causal);
template <typename T>
void softmax_backward(const T* y, const T* dy, T* dx, int64_t rows, int64_t C);

// attention.cpp: q, out (B, Tq, NH, HS); k, v (B, Tk, NKV, HS); att (B, NH,
// Tq, Tk) probabilities. Query i sits at position q_offset + i of the keys'
// sequence (self-attention: Tq = Tk, q_offset 0; context parallel: a slice
// of the queries against every key). causal: query i sees keys
// 0..q_offset+i (att is 0 after); none: every key. ld_qkv: the row stride
// (elements from position t to t + 1) of q, k, v and of dq, dk, dv; 0 means
// their own tensors (NH*HS, and NKV*HS for k and v); (NH + 2 NKV) HS reads them from (and writes their
// gradients into) one packed (B, T, NH + 2 NKV, HS) qkv tensor. out and dout
// always have their own (NH*HS).
enum class AttentionMask : uint8_t { none, causal };
// NKV: K/V heads (grouped-query attention; 0 means NH): query head h reads
// K/V head h / (NH / NKV); k, v, dk, dv are (B, Tk, NKV, HS), rows NKV*HS
// apart, or ld_qkv in a packed (B, T, (NH + 2 NKV) HS) qkv.
struct AttentionDims {
  int64_t B = 0, Tq = 0, Tk = 0, NH = 0, HS = 0, q_offset = 0, ld_qkv = 0, NKV = 0;
};
template <typename T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* att, const AttentionDims& d, AttentionMask mask);
template <typename T>
void attention_backward(const T* dout, const T* q, const T* k, const T* v, const T* att, T* dq, T* dk, T* dv,
                        const AttentionDims& d, AttentionMask mask);

// cross_entropy.cpp: logits (N, V), targets (N). Forward writes per-row loss
// (0 for ignored rows) and logsumexp; backward writes dlogits =
// dloss_row[r] * (softmax - onehot), recomputing softmax from lse.
template <typename T>
void cross_entropy_forward(const T* logits, const int32_t* targets, T* loss, T* lse, int64_t N, int64_t V,
                           int32_t ignore_index);
template <typename T>
void cross_entropy_backward(const T* logits, const T* lse, const int32_t* targets, T dloss, T* dlogits, int64_t N,
                            int64_t V, int32_t ignore_index);

// cross_entropy_shard.cpp: the vocabulary-sharded cross-entropy's steps
// (kernels/cuda/cross_entropy_shard.h has the formulas).
template <typename T>
void ce_shard_stats(const T* logits, const int32_t* targets, int64_t N, int64_t V, int64_t Vv, int64_t start, T* m,
                    T* s, T* t);
template <typename T>
void ce_shard_rescale(const T* m, const T* M, T* s, int64_t N);
template <typename T>
void ce_shard_finish(const T* M, const T* S, const T* Tg, const int32_t* targets, int64_t N, int32_t ignore_index,
                     T* losses, T* lse);
template <typename T>
void ce_shard_backward(const T* logits, const T* lse, const int32_t* targets, int64_t N, int64_t V, int64_t Vv,
                       int64_t start, int32_t ignore_index, T scale, T* d);

// embedding.cpp: w (V, C) holds ids [start, start + V); ids (n); other ids
// give zero rows. Backward zeroes dw, then sums rows.
template <typename T>
void embedding_forward(const T* w, const int32_t* ids, T* out, int64_t n, int64_t C, int64_t start, int64_t V);
template <typename T>
void embedding_backward(const T* dout, const int32_t* ids, T* dw, int64_t n, int64_t V, int64_t C, int64_t start);
// The positions bucketed by table row in CSR form, the GPU backward's input
// (kernels/cuda/bucket_by_id.h): the positions of row v (id start + v) are
// order[row_start[v] .. row_start[v + 1]), increasing; ids outside the
// table are in no bucket. A stable counting sort, O(n + V).
void bucket_by_id(const int32_t* ids, int64_t n, int64_t start, int64_t V, int32_t* order, int32_t* row_start);
// out[b, t, :] = x[b, t, :] + table[t, :] for x (B, T, C) and the T rows of
// a position table starting at `table` (add_positions; its backward is
// bias_backward over (B, T C)).
template <typename T>
void add_positions_forward(const T* x, const T* table, T* out, int64_t B, int64_t T_, int64_t C);

// reduce.cpp: x viewed as (outer, n, inner); sum over n -> (outer, inner).
template <typename T>
void sum_dim(const T* x, T* out, int64_t outer, int64_t n, int64_t inner);
// the adjoint: dx[o, j, i] = alpha * g[o, i]
template <typename T>
void broadcast_dim(const T* g, T* dx, T alpha, int64_t outer, int64_t n, int64_t inner);
template <typename T>
double sum_all(const T* x, int64_t n);  // accumulated in double

// layout.cpp: out = x permuted; shape/dims of length ndim <= 8.
template <typename T>
void permute(const T* x, T* out, const int64_t* shape, const int* dims, int ndim);
// Copies an (outer, cols) block between row-strided buffers (concat/split).
template <typename T>
void copy_rows(const T* src, int64_t src_stride, T* dst, int64_t dst_stride, int64_t outer, int64_t cols);

// dropout.cpp: keep with probability 1-p, mask from rng at (seed, offset+i).
template <typename T>
void dropout_forward(const T* x, T* out, int64_t n, double p, uint64_t seed, uint64_t offset);
template <typename T>
void dropout_backward(const T* dout, T* dx, int64_t n, double p, uint64_t seed, uint64_t offset);

// loss.cpp
template <typename T>
double mse_forward(const T* pred, const T* target, int64_t n);  // mean
template <typename T>
void mse_backward(const T* pred, const T* target, T g, T* dpred, int64_t n);

}  // namespace eng::cpu

namespace eng::cpu {
// optim.cpp: one parameter tensor per call, fp32 state, torch.optim's formulas.
template <typename T>
void adamw_step(T* p, const T* g, T* m, T* v, int64_t n, double lr, double beta1, double beta2, double eps,
                double weight_decay, double bias_correction1, double bias_correction2);
template <typename T>
void sgd_step(T* p, const T* g, T* buf, int64_t n, double lr, double momentum, double dampening, double weight_decay,
              bool nesterov, bool first_step);
template <typename T>
double sum_squares(const T* x, int64_t n);

// optim8bit.cpp: 8-bit AdamW, moments as 1-byte codes into a 256-entry map
// with one fp32 absmax per block of kQuantBlock elements.
inline constexpr int64_t kQuantBlock = 256;
std::array<float, 256> dynamic_map(bool is_signed);   // sorted; see optim8bit.cpp
uint8_t quantize_nearest(const float* map, float x);  // index of the nearest entry (ties: the lower)
// The per-step constants, as the fused kernel's descriptor holds them (fp32,
// computed in double on the host as for AdamW).
struct Adam8bitScalars {
  float beta1, beta2, eps;
  float decay;      // 1 - lr wd
  float step_size;  // lr / (1 - beta1^t)
  float sqrt_bc2;   // sqrt(1 - beta2^t)
  bool grad_scale_on = false;
  float grad_scale = 1.f;  // g = fl(grad x grad_scale) when on
};
void adamw8bit_step(float* p, const float* grad, uint8_t* m8, float* m_absmax, uint8_t* v8, float* v_absmax, int64_t n,
                    const float* smap, const float* umap, const Adam8bitScalars& s);

// adafactor.cpp: one tensor, seen as `batch` matrices of rows x cols.
struct AdafactorScalars {
  float beta2t;  // 1 - t^decay_rate
  float rel_lr;  // the step size before parameter scaling
  float eps1 = 1e-30f, eps2 = 1e-3f, clip = 1.f;
  float weight_decay = 0.f;
  float beta1 = 0.f;  // used when m is given
  bool scale_parameter = false;
  bool grad_scale_on = false;
  float grad_scale = 1.f;
};
// row (batch x rows) and col (batch x cols) when factored, else v (n); m nullable.
void adafactor_step(float* p, const float* grad, float* row, float* col, float* v, float* m, int64_t batch,
                    int64_t rows, int64_t cols, const AdafactorScalars& s);
}  // namespace eng::cpu
