// The define-by-run autograd tape (micrograd's idea, in C++).
// Every differentiable op calls record() with its output, its inputs and a
// backward closure that captures the saved tensors it needs. backward() walks
// the graph in an iterative topological order, calls each closure once with
// the summed gradient of its output, and accumulates (+=) into leaf .grad, so
// gradient accumulation over micro-batches needs no extra code. A closure is
// destroyed as soon as it has run, releasing its saved activations.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace eng {

// An offer by an op whose backward begins with an elementwise step on its
// output's gradient: that step can be the epilogue of the GEMM that
// computes the gradient, in the op that consumes its output. linear_gelu
// offers GELU's derivative at its saved pre-activation (cuBLASLt's DGELU):
// the next layer's input-gradient GEMM applies it and sets `applied`, and
// linear_gelu's backward then takes its gradient as dpre, with no
// gelu_backward pass. With want_dbias (bias gradients fused, engine/ops.h)
// that GEMM also writes the column sums of the gradient it makes into
// dbias: linear_gelu's bias gradient, with no pass over it of its own.
// An offer of the sums alone (no gelu_pre: linear_residual's, whose output
// is a residual stream) goes to the backward that finishes the gradient
// (offered_grad_sums): layernorm's on emu/cuda, whose kernel writes the
// whole gradient and sums its columns as it stores them (dbias in fp32).
struct GradEpilogue {
  Tensor gelu_pre = {};  // gradient -> gradient * gelu'(gelu_pre)
  bool applied = false;
  bool want_dbias = false;
  Tensor dbias = {};  // the sums when applied with want_dbias: the gradient's dtype (a GEMM's), fp32 (layernorm's)
};

// grad: gradient of the op's output; needs[i]: whether input i wants a
// gradient. Returns one tensor per input (undefined where needs[i] is false).
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad, const std::vector<bool>& needs)>;

struct Edge {
  Shape shape;  // the input's shape, checked against its gradient
  DType dtype = DType::f32;
  std::shared_ptr<Node> fn;          // the producer of a non-leaf input
  std::shared_ptr<TensorImpl> leaf;  // or a leaf that requires grad
  bool live() const { return fn || leaf; }
};

struct Node {
  std::string name;        // the op's name, for error messages and debugging
  std::vector<Edge> next;  // one per input, dead edges for inputs without grad
  BackwardFn backward;
  Tensor grad_out;  // sum of incoming gradients, filled during backward
  int pending = 0;  // consumers not yet processed, used by backward()
  // Set by checkpoint(): this node's backward runs a nested backward that
  // adds into leaves the outer graph has no edges to.
  bool nested_backward = false;
  int layer = 0;  // the profiler's layer it was recorded in (engine/profile.h; 0: none)
  // A cast of fp32 to 16 bits (autocast's): its backward takes an fp32
  // gradient as well as one in its output's dtype (takes_wide_grad).
  bool accepts_wide_grad = false;
  // Set by take_master_grad: this cast's backward hands on its master's own
  // gradient, already accumulated into in place (autograd adds nothing).
  bool passes_master_grad = false;
  // What this node offers to have done to its output's gradient by the
  // GEMM that computes it (offered_grad_epilogue), or the column sums of
  // that gradient by the backward that finishes it (offered_grad_sums);
  // dropped once it has run.
  std::shared_ptr<GradEpilogue> grad_epilogue;
};

bool grad_enabled();

// Disables recording in its scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Re-enables recording inside a no_grad scope (used by checkpoint's recompute).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

// True when grad is enabled and any input requires grad.
bool needs_record(const std::vector<Tensor>& inputs);

// Attaches a node to `out` if needs_record(inputs); returns whether it did.
bool record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn);

// The same, but records even when no input requires grad (checkpoint uses it:
// the parameters inside its block are not among its inputs).
void record_always(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn);

// Runs backward from `root` seeded with `grad` (ones for a scalar root).
void run_backward(const Tensor& root, const Tensor& grad);
// Runs backward from a scalar `root` seeded with `seed`, a value the host
// knows: the root's node is told it (known_seed), so a loss that already
// computed its input's gradient for that seed in its forward (the fused
// cross-entropy) hands it back without a pass to rescale it, and without
// reading the device, so the backward can be captured in a CUDA graph.
void run_backward(const Tensor& root, double seed);
// Inside the root node's backward: the seed's host value when `g` is the
// seed (the root was seeded with ones, or a value by the overload above);
// nothing anywhere else, where a gradient may have been summed in place.
std::optional<double> known_seed(const Tensor& g);

// Inside a node's backward: the gradient already summed for its input
// `input` from the other consumers of that input (a residual stream's
// gradient, where the block's branch reaches the layernorm last), or an
// undefined tensor when none has arrived yet, the input is a leaf or needs
// no gradient. A backward that adds it inside its own kernel (layernorm's
// dx on emu/cuda) takes it and returns the sum as that input's gradient;
// autograd then keeps the returned tensor in place of the pending one
// instead of adding the two (one pass less, no in-place add). It is only
// read: the pending tensor may be shared with other nodes.
Tensor take_pending_grad(size_t input);

// Inside a node's backward: the gradient leaf input `input` already holds (a
// contribution made earlier in this backward, such as a tied weight's other
// use, or an earlier micro-batch's), for the backward to add its own into
// in place, where that costs less than a separate tensor and an add (the
// embedding's backward touches only the rows its ids name). It must return
// that same tensor as the input's gradient; autograd then keeps it as the
// leaf's gradient and adds nothing. Undefined when the input is no leaf or
// holds no gradient yet.
Tensor take_leaf_grad(size_t input);

// Inside a node's backward: whether input `input`'s gradient may be
// returned in fp32 although the input is 16-bit. True for a cast of fp32 to
// 16 bits (autocast's copy of a master weight: its node accepts_wide_grad)
// when this backward is the only one to contribute to its gradient: a GEMM
// that writes a weight gradient in fp32 then leaves nothing for the cast's
// backward to do. False anywhere else.
bool takes_wide_grad(size_t input);
// Inside a node's backward, for an input that takes_wide_grad: the fp32
// gradient its master (the leaf the cast reads) already holds, of the
// input's shape, for the backward to accumulate its own into in place (a
// weight gradient GEMM with beta 1: micro-batches' gradients add up with no
// pass of their own); undefined when the master holds none yet. The
// backward must return that tensor as the input's gradient; the cast hands
// it on and autograd adds nothing.
Tensor take_master_grad(size_t input);
// Whether take_master_grad(input) would hand a gradient out, without taking
// it (a backward that needs two of them, or neither, asks first).
bool master_grad_available(size_t input);
// Marks out's node (a cast of fp32 to 16 bits) as taking fp32 gradients; its
// backward must then pass an fp32 gradient through as it is.
void accept_wide_grad(const Tensor& out);

// Inside a node's backward: the epilogue input `input`'s producer offers for
// its gradient (GradEpilogue), when this backward is the only one to
// contribute to that gradient; nullptr otherwise. A backward that applies
// it returns the transformed gradient and sets `applied`.
GradEpilogue* offered_grad_epilogue(size_t input);
// Inside a node's backward: the offer input `input`'s producer makes of its
// gradient's column sums alone (GradEpilogue without gelu_pre, want_dbias),
// when this backward is the last to contribute to that gradient (every
// other consumer's is summed and pending); nullptr otherwise. A backward
// that applies it must return the input's whole gradient, the pending one
// taken and added in (take_pending_grad), and its sums in `dbias`.
GradEpilogue* offered_grad_sums(size_t input);
// Attaches the offer to out's node (out must have been recorded).
void offer_grad_epilogue(const Tensor& out, std::shared_ptr<GradEpilogue> offer);

// The seed the loss computed in its scope will be backpropagated from
// (1 by default): set around the forward by a training step that seeds its
// loss with 1/grad_accum, read by the losses that fold their backward into
// their forward (cross_entropy on emu/cuda). One per thread, nesting.
class ExpectedSeed {
 public:
  explicit ExpectedSeed(double seed);
  ~ExpectedSeed();
  ExpectedSeed(const ExpectedSeed&) = delete;
  ExpectedSeed& operator=(const ExpectedSeed&) = delete;
  static double current();

 private:
  double prev_;
};

// Activation checkpointing: runs fn(inputs) without recording, and in
// backward runs it again with recording to get the gradients. Any randomness
// inside fn must be derived from its inputs or fixed seeds so that the
// recompute sees the same values (our dropout takes an explicit seed/offset).
Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs);

}  // namespace eng
