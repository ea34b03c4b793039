// Engine-facing ops: each checks shapes, dtypes and devices (errors name the
// op and the shapes), dispatches to the kernel for the tensor's device, and
// records its backward on the autograd tape. Each op lives in
// engine/ops/<op>.cpp with its backward beside its forward.
// Floating ops run on f32 (training) and f64 (gradient checks) on the cpu device.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "kernels/gemm/gemm.h"

namespace eng {

// Trans (N or T) comes from kernels/gemm/gemm.h.
enum class Causal : uint8_t { no, yes };

// C = op(A) @ op(B) (+ bias over the last dim). A is (..., M, K) (or (..., K, M)
// with Trans::T), B is (K, N) / (N, K) shared by every batch, or batched with
// the same leading dims as A.
Tensor matmul(const Tensor& a, const Tensor& b, Trans ta = Trans::N, Trans tb = Trans::N,
              const Tensor& bias = Tensor());
// Which GEMM runs matmul's bf16/f16 products on emu and cuda, process-wide
// (as torch.backends' matmul settings): GemmImpl::cublaslt, cuBLASLt on cuda
// (our tiled CUDA-core GEMM stands in for it on emu, which cannot run the
// vendor's), the default; GemmImpl::mma, our tensor-core GEMM
// (kernels/cuda/gemm_mma.cu) for every 16-bit product whose layout it takes
// (gemm_mma_takes: 16-byte rows), the default's for the rest. f32 products
// and the cpu are unaffected. Set once before a run (train --gemm).
enum class GemmImpl : uint8_t { cublaslt, mma };
void set_gemm_impl(GemmImpl impl);
GemmImpl gemm_impl();
// "cublaslt" / "mma", and back (an error naming the accepted values).
const char* gemm_impl_name(GemmImpl impl);
GemmImpl parse_gemm_impl(const std::string& name);
// Where a linear layer's bias gradient is made on emu and cuda,
// process-wide:
//   epilogue (the default): by the weight gradient GEMM's epilogue
//     (cuBLASLt's BGRADB; ours on emu);
//   apart: by a column-sum kernel after a GEMM without one
//     (kernels/cuda/bias_grad.h), added straight into an fp32 master's
//     gradient by later micro-batches;
//   fused: apart, but a linear_gelu's from the GEMM that makes its
//     gradient (the next layer's input gradient with GELU's derivative:
//     cuBLASLt's DGELU_BGRAD; on emu that GEMM, then the column sums of
//     what it wrote), in the gradient's dtype as cuBLASLt writes it (bf16
//     under autocast); and a linear_residual's from the layernorm backward
//     that finishes its output's gradient (a pre-LN block's next
//     layernorm: its kernel sums dx's columns as it stores dx, in fp32).
// The first call of bias_grad_mode reads ENGINE_BIAS_GRAD (epilogue, apart
// or fused) unless set_bias_grad_mode came first.
enum class BiasGradMode : uint8_t { epilogue, apart, fused };
void set_bias_grad_mode(BiasGradMode mode);
BiasGradMode bias_grad_mode();
// "epilogue" / "apart" / "fused", and back (an error naming the accepted values).
const char* bias_grad_mode_name(BiasGradMode mode);
BiasGradMode parse_bias_grad_mode(const std::string& name);
// PyTorch's nn.functional.linear: x (..., in) @ w(out, in)^T + b(out).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
// gelu(linear(x, w, b)) in one op, the GELU fused into the GEMM's epilogue on
// emu and cuda (engine/ops/linear_gelu.cpp); b is required.
Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor& b);
// r + linear(x, w, b) in one op, a residual block's output projection: on the
// cpu the GEMM adds onto r + b (engine/ops/linear_residual.cpp); b may be
// undefined (no bias: r + x w^T).
Tensor linear_residual(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r);

Tensor add(const Tensor& a, const Tensor& b);  // same shape (residual add)
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);  // elementwise, same shape
Tensor scale(const Tensor& x, double s);       // s * x
// x (..., N) + b (N) on every row (a bias added apart from its GEMM: the
// row-parallel linear adds it once, after the reduce over tp).
Tensor add_bias(const Tensor& x, const Tensor& b);
Tensor gelu(const Tensor& x);  // tanh approximation, as GPT-2
Tensor relu(const Tensor& x);

// Normalises over the last dim C; w and b are (C).
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps = 1e-5);
// Residual add fused with the layernorm after it (llm.c fused_residual_forward):
// returns (sum, normed), sum = x + r, normed = layernorm(sum, w, b). Gradients
// reaching sum and normed both flow into x and r.
std::pair<Tensor, Tensor> add_layernorm(const Tensor& x, const Tensor& r, const Tensor& w, const Tensor& b,
                                        double eps = 1e-5);
// RMSNorm over the last dim (Llama's): x rsqrt(mean(x^2) + eps) w; w is (C).
Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps = 1e-5);
// The residual add fused with the rmsnorm after it, as add_layernorm:
// (sum, normed), sum = x + r, normed = rmsnorm(sum, w).
std::pair<Tensor, Tensor> add_rmsnorm(const Tensor& x, const Tensor& r, const Tensor& w, double eps = 1e-5);
// SwiGLU on a packed gate|up projection (Llama's MLP): gu (..., 2H) holds
// [gate | up] in its last dim; returns silu(gate) * up, (..., H).
Tensor swiglu(const Tensor& gu);
// The rotary position embedding's table, as Hugging Face's
// LlamaRotaryEmbedding computes it: fp32 (positions, head_size), the cos of
// pair i's angle at [t][i] and its sin at [t][head_size/2 + i], angle = t *
// inv_freq[i], inv_freq[i] = theta^(-2i/head_size), with Llama 3's
// frequency scaling (rope_scaling rope_type "llama3") when factor > 0.
struct RopeOptions {
  double theta = 10000.0;  // rope_theta
  double factor = 0;       // llama3 scaling: 0 off
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_positions = 8192;  // original_max_position_embeddings
  void validate() const;                  // errors name the field
};
Tensor rope_table(int64_t positions, int64_t head_size, const RopeOptions& o, Device dev);
// Turns the first rot_heads heads (of table.size(1) values) of every (b, t)
// row of x (B, T, ...) by the angles of positions pos_offset + t, IN PLACE
// (Hugging Face Llama's rotate_half layout: pair i is (x[i], x[i + HS/2])),
// and returns x's storage as a new node. For a packed qkv (B, T, (NH + 2
// NKV) HS): rot_heads = NH + NKV turns q and k, v untouched. x must be an
// op's output that nothing has saved (a GEMM's), never a leaf; pos_offset:
// the first position (context parallel's slice, a KV cache's length).
Tensor rope_(const Tensor& x, const Tensor& table, int64_t rot_heads, int64_t pos_offset = 0);
// Softmax over the last dim. Causal::yes needs x (..., T, T) and masks keys j > query i.
Tensor softmax(const Tensor& x, Causal causal = Causal::no);
// Self-attention, q/k/v (B, T, NH, HS) -> (B, T, NH, HS), scores scaled by
// 1/sqrt(HS). Causal::yes (a decoder, GPT-2): query i attends to keys 0..i.
// Causal::no (an encoder, ViT): every query attends to all T keys, as
// PyTorch's scaled_dot_product_attention(is_causal=False) without a mask.
// AttentionImpl::ours runs our kernels: the cpu reference, or on emu and
// cuda the tensor-core ones (kernels/cuda/attention_mma.cu) in bf16/f16 at
// head size 64 or 128, the CUDA-core ones (kernels/cuda/attention.cu)
// otherwise (a 16-bit call they do not take is said once a process).
// AttentionImpl::ours_cuda_cores runs the CUDA-core kernels always (the
// ladder's rung below, to compare in training). AttentionImpl::cudnn runs
// cuDNN's fused attention (kernels/cudnn/), on the cuda device in bf16/f16
// only, and is an error, saying why, anywhere else: never a silent fallback.
enum class AttentionImpl : uint8_t { ours, ours_cuda_cores, cudnn };
// q_offset (context parallelism): q is (B, Tq, NH, HS), the queries at
// positions q_offset .. q_offset + Tq - 1 of the keys' sequence, k and v are
// (B, Tk, NH, HS), all of it; causal masks keys j > q_offset + i. ours only.
// k and v may have fewer heads, NKV dividing NH (grouped-query attention):
// query head h reads K/V head h / (NH / NKV), in place. ours only.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, Causal causal = Causal::yes,
                 AttentionImpl impl = AttentionImpl::ours, int64_t q_offset = 0);
// Self-attention on the packed output of a qkv projection: qkv (B, T, 3C)
// holds q, k, v side by side in its last dim (C = NH * HS each), as GPT-2's
// c_attn writes them; returns (B, T, NH, HS). The same as splitting qkv into
// three and calling attention, which is what it does on emu and cuda; on the
// cpu the kernel reads q, k, v in place and its backward writes dqkv in one
// tensor (no split copies, no zero-padded gradients to add up).
// n_kv_head (grouped-query attention, Llama's; 0: n_head): qkv is (B, T,
// (n_head + 2 n_kv_head) HS), q's heads then k's then v's, and query head h
// reads K/V head h / (n_head / n_kv_head) in place; our kernels only.
Tensor attention_qkv(const Tensor& qkv, int64_t n_head, Causal causal = Causal::yes,
                     AttentionImpl impl = AttentionImpl::ours, int64_t n_kv_head = 0);
// "ours" / "ours_cuda_cores" / "cudnn", and back (an error naming the accepted values).
const char* attention_impl_name(AttentionImpl impl);
AttentionImpl parse_attention_impl(const std::string& name);

// A vocabulary split over ranks (tensor parallel): this rank's table or
// logits hold ids [start, start + rows); the whole has `vocab` real ids.
struct VocabShard {
  int64_t start = 0;  // first id of this shard
  int64_t vocab = 0;  // real ids in the whole vocabulary
};

// Mean over non-ignored rows of -log softmax(logits)[target]; logits (N, V), targets i32 (N).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -100);
// cross_entropy over the first `classes` columns of logits (N, W >= classes):
// a vocabulary padded to W for aligned GEMMs. The padding takes no part
// (never predicted; targets must be below classes) and gets zero gradient.
Tensor cross_entropy_padded(const Tensor& logits, const Tensor& targets, int64_t classes, int32_t ignore_index = -100);
// cross_entropy when the vocabulary is split over ranks (tensor parallel):
// logits (N, V) are columns [start, start + V) of the full (N, padded) logits;
// ids at or past `vocab` pad the vocabulary and take no part (never
// predicted, zero gradient). `reduce` reduces a tensor in place over the
// ranks holding the other shards (an all-reduce; nothing for one shard); it
// is called in the forward only, with max once and sum once. Every rank gets
// the same loss; the backward is local. Targets: in [0, vocab) or ignored.
enum class ShardReduce : uint8_t { max, sum };
using ShardReduceFn = std::function<void(Tensor&, ShardReduce)>;
Tensor cross_entropy_sharded(const Tensor& logits, const Tensor& targets, VocabShard shard, const ShardReduceFn& reduce,
                             int32_t ignore_index = -100);
Tensor mse_loss(const Tensor& pred, const Tensor& target);  // mean of squared differences
// Rows of weight (V, C) picked by ids (i32, any shape) -> (ids..., C).
Tensor embedding(const Tensor& weight, const Tensor& ids);
// The same for a shard holding ids [start, start + V) of shard.vocab ids:
// other ids give zero rows (summed over tp: the vocab-parallel embedding).
Tensor embedding(const Tensor& weight, const Tensor& ids, VocabShard shard);
// x (B, T, C) + table[first + t] on every row t (a learned position
// embedding, table (P, C) with P >= first + T), in out_dtype: x's, or on
// emu/cuda a 16-bit compute dtype (autocast's cast of the sum, fused). The
// table's gradient is the column sums of the output's over b (rows outside
// [first, first + T) zero): no ids, no bucketing (llm.c's encoder).
Tensor add_positions(const Tensor& x, const Tensor& table, int64_t first, DType out_dtype);
// add_positions(embedding(w, ids), pos, first, out_dtype) for (B, T) ids: on
// emu/cuda with fp32 tables and a 16-bit out_dtype one kernel forward and
// no fp32 copy of the gradient backward (GPT-2's embeddings); the same
// values either way (engine/ops/embedding.cpp).
Tensor embedding_positions(const Tensor& w, const Tensor& ids, const Tensor& pos, int64_t first, DType out_dtype);

Tensor permute(const Tensor& x, const std::vector<int>& dims);
Tensor transpose(const Tensor& x, int d0, int d1);

Tensor sum(const Tensor& x);                                 // scalar
Tensor mean(const Tensor& x);                                // scalar
Tensor sum(const Tensor& x, int dim, bool keepdim = false);  // along one dim
Tensor mean(const Tensor& x, int dim, bool keepdim = false);

Tensor concat(const std::vector<Tensor>& xs, int dim);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int dim);
// Elements [start, start + length) of dim, copied (torch.narrow(...).contiguous()).
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);
// x (R, ...) in `dtype` with zero rows appended up to `rows` (>= R): a table
// padded for aligned GEMMs, cast on the way (the cast kernel on emu/cuda).
// Backward: the gradient's first R rows in x's dtype.
Tensor pad_rows(const Tensor& x, int64_t rows, DType dtype);

// Inverted dropout: keeps each element with probability 1-p and scales it by
// 1/(1-p). The mask comes from a counter-based RNG at (seed, offset + index),
// so it is reproducible and the same on every device.
Tensor dropout(const Tensor& x, double p, uint64_t seed, uint64_t offset);

// In-place helpers for optimizers and gradient accumulation; never recorded.
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);  // dst += alpha * src
void scale_(Tensor& t, double s);
void fill_(Tensor& t, double value);

}  // namespace eng
