// The autograd tape: recording, the topological backward, checkpointing.
// Grad mode is thread-local, as in PyTorch, so a data-loading thread can never
// turn recording off for the training thread.
#include "engine/autograd.h"

#include <algorithm>
#include <unordered_map>

#include "base/error.h"
#include "engine/ops.h"
#include "engine/profile.h"

namespace eng {

static thread_local bool g_grad_enabled = true;

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }
EnableGradGuard::EnableGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { g_grad_enabled = prev_; }

bool needs_record(const std::vector<Tensor>& inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record_always(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->layer = profile::current_layer();
  for (const Tensor& t : inputs) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      e.shape = t.shape();
      e.dtype = t.dtype();
      if (t.is_leaf())
        e.leaf = t.impl_ptr();
      else
        e.fn = t.impl()->grad_fn;
    }
    node->next.push_back(std::move(e));
  }
  node->backward = std::move(fn);
  out.impl()->grad_fn = std::move(node);
}

bool record(const char* name, Tensor& out, const std::vector<Tensor>& inputs, BackwardFn fn) {
  if (!needs_record(inputs)) return false;
  record_always(name, out, inputs, std::move(fn));
  return true;
}

// A private copy: the incoming gradient may alias a tensor another node still reads.
static Tensor copy_of(const Tensor& g) {
  Tensor c = Tensor::empty(g.shape(), g.dtype(), g.device());
  c.copy_from(g);
  return c;
}

// Whether nothing but this handle can reach t's memory: no other handle to
// its impl, no view sharing its storage. Such a gradient (a backward's fresh
// output, once passed on) can be kept or added into in place, not copied.
// The storage may hold up to `slack` bytes past t's own (the leading rows of
// a padded product); by default exactly t.
static bool sole_owner(const Tensor& t, size_t slack = 0) {
  const TensorImpl* i = t.impl();
  const size_t bytes = size_t(t.numel()) * dtype_size(t.dtype());
  return t.impl_ptr().use_count() == 1 && i->storage.use_count() == 1 && i->offset == 0 && !i->grad_fn && !i->grad &&
         i->storage->bytes >= bytes && i->storage->bytes - bytes <= slack;
}

static void accumulate_leaf(TensorImpl* leaf, Tensor g) {
  if (!leaf->grad) {
    // A leaf also keeps the leading rows of a storage a little larger (the
    // lm_head's padded product, engine/precision.cpp) instead of copying them.
    const size_t bytes = size_t(g.numel()) * dtype_size(g.dtype());
    leaf->grad = sole_owner(g, bytes / 8) ? g.impl_ptr() : copy_of(g).impl_ptr();
  } else {
    Tensor acc(leaf->grad);
    add_(acc, g);
  }
}

static void fire_final_hooks(TensorImpl* leaf) {
  for (auto& hook : leaf->final_hooks) {
    Tensor g(leaf->grad);
    hook(g);
  }
}

// A checkpoint node's backward runs a nested backward that adds into leaves
// (its block's parameters) the outer graph has no edges to, so the outer
// backward cannot tell when those leaves are final. Nested backwards therefore
// never fire hooks: they report finished leaves to the outermost backward,
// which holds back every hook while a checkpoint node is still pending.
static thread_local std::vector<std::shared_ptr<TensorImpl>>* g_finished_leaves = nullptr;

namespace {
// The root node's seed and its host value while that node's backward runs (known_seed).
thread_local const TensorImpl* t_known_seed = nullptr;
thread_local double t_known_value = 0;
thread_local double t_expected_seed = 1.0;
}  // namespace

namespace {
// The node whose backward runs, and which of its inputs' pending gradients
// that backward took (take_pending_grad); saved and restored around each
// backward, so a nested one (a checkpoint's) has its own.
thread_local Node* t_running = nullptr;
thread_local std::vector<char>* t_taken = nullptr;
}  // namespace

Tensor take_pending_grad(size_t input) {
  if (!t_running || input >= t_running->next.size()) return Tensor();
  const Edge& e = t_running->next[input];
  if (!e.fn || !e.fn->grad_out.defined()) return Tensor();
  (*t_taken)[input] = 1;
  return e.fn->grad_out;
}

Tensor take_leaf_grad(size_t input) {
  if (!t_running || input >= t_running->next.size()) return Tensor();
  const Edge& e = t_running->next[input];
  if (!e.leaf || !e.leaf->grad) return Tensor();
  (*t_taken)[input] = 1;
  return Tensor(e.leaf->grad);
}

// The producer of input `input` of the running node, when the running node
// is the only one that contributes to its gradient: no other consumer is
// left (pending 1: this one) and none has contributed (grad_out empty).
static Node* sole_contributor_of(size_t input) {
  if (!t_running || input >= t_running->next.size()) return nullptr;
  const Edge& e = t_running->next[input];
  if (!e.fn || e.fn->pending != 1 || e.fn->grad_out.defined()) return nullptr;
  return e.fn.get();
}

bool takes_wide_grad(size_t input) {
  const Node* up = sole_contributor_of(input);
  return up && up->accepts_wide_grad;
}

// The cast of input `input` and its master's gradient, when take_master_grad
// can hand that gradient out (see autograd.h); nullptr otherwise.
static Node* master_grad_source(size_t input) {
  Node* up = sole_contributor_of(input);
  if (!up || !up->accepts_wide_grad || up->next.size() != 1) return nullptr;
  const Edge& master = up->next[0];
  if (!master.leaf || !master.leaf->grad) return nullptr;
  const TensorImpl& acc = *master.leaf->grad;
  const Shape& want = t_running->next[input].shape;
  if (acc.dtype != DType::f32 || acc.shape.empty() || want.size() != acc.shape.size()) return nullptr;
  if (want != acc.shape) {
    // A copy padded with rows (the lm_head's): the master's gradient is
    // the leading rows of a storage that holds the padded ones too, and
    // that no other tensor shares (the first micro-batch's padded product,
    // kept by accumulate_leaf), or it cannot be added into.
    if (!std::equal(want.begin() + 1, want.end(), acc.shape.begin() + 1) || want[0] < acc.shape[0]) return nullptr;
    const size_t bytes = size_t(shape_numel(want)) * 4;
    if (acc.offset != 0 || acc.storage.use_count() != 1 || acc.storage->bytes < bytes) return nullptr;
  }
  return up;
}

bool master_grad_available(size_t input) { return master_grad_source(input) != nullptr; }

Tensor take_master_grad(size_t input) {
  Node* up = master_grad_source(input);
  if (!up) return Tensor();
  up->passes_master_grad = true;
  auto view = std::make_shared<TensorImpl>(*up->next[0].leaf->grad);  // the same memory, the input's shape
  view->shape = t_running->next[input].shape;
  view->grad.reset(), view->grad_fn.reset(), view->final_hooks.clear();
  view->requires_grad = false;
  return Tensor(std::move(view));
}

// Whether g is the memory of the leaf's gradient (handed on by a cast after
// take_master_grad, as it is or as its leading rows).
static bool is_leaf_grad(const Tensor& g, const TensorImpl* leaf) {
  const TensorImpl* acc = leaf->grad.get();
  return acc && g.impl()->storage == acc->storage && g.impl()->offset == acc->offset && g.shape() == acc->shape;
}

void accept_wide_grad(const Tensor& out) {
  if (out.impl()->grad_fn) out.impl()->grad_fn->accepts_wide_grad = true;
}

GradEpilogue* offered_grad_epilogue(size_t input) {
  Node* up = sole_contributor_of(input);
  return up ? up->grad_epilogue.get() : nullptr;
}

GradEpilogue* offered_grad_sums(size_t input) {
  if (!t_running || input >= t_running->next.size()) return nullptr;
  const Edge& e = t_running->next[input];
  if (!e.fn || e.fn->pending != 1 || !e.fn->grad_epilogue) return nullptr;
  GradEpilogue* offer = e.fn->grad_epilogue.get();
  return !offer->gelu_pre.defined() && offer->want_dbias && !offer->applied ? offer : nullptr;
}

void offer_grad_epilogue(const Tensor& out, std::shared_ptr<GradEpilogue> offer) {
  ENGINE_CHECK(out.impl()->grad_fn, "offer_grad_epilogue: ", out.desc(), " was not recorded");
  out.impl()->grad_fn->grad_epilogue = std::move(offer);
}

std::optional<double> known_seed(const Tensor& g) {
  if (g.defined() && g.impl() == t_known_seed) return t_known_value;
  return std::nullopt;
}

ExpectedSeed::ExpectedSeed(double seed) : prev_(t_expected_seed) { t_expected_seed = seed; }
ExpectedSeed::~ExpectedSeed() { t_expected_seed = prev_; }
double ExpectedSeed::current() { return t_expected_seed; }

static void backward_from(const Tensor& root, const Tensor& grad, std::optional<double> known);

void run_backward(const Tensor& root, double seed) {
  ENGINE_CHECK(root.numel() == 1, "backward: a seed value needs a scalar root, got ", root.desc());
  backward_from(root, Tensor::full(root.shape(), seed, root.dtype(), root.device()), seed);
}

void run_backward(const Tensor& root, const Tensor& grad) {
  if (!grad.defined()) {
    ENGINE_CHECK(root.numel() == 1, "backward: a non-scalar root ", root.desc(), " needs an explicit gradient");
    run_backward(root, 1.0);
    return;
  }
  backward_from(root, grad, std::nullopt);
}

static void backward_from(const Tensor& root, const Tensor& grad, std::optional<double> known) {
  ENGINE_CHECK(root.requires_grad(), "backward: ", root.desc(), " does not require grad (nothing recorded)");
  NoGradGuard no_grad;
  const bool nested = g_finished_leaves != nullptr;
  const Tensor& seed = grad;
  ENGINE_CHECK(seed.shape() == root.shape(), "backward: gradient ", seed.desc(), " for root ", root.desc());
  if (root.is_leaf()) {
    accumulate_leaf(root.impl(), seed);
    if (nested)
      g_finished_leaves->push_back(root.impl_ptr());
    else
      fire_final_hooks(root.impl());
    return;
  }

  // Count, for every reachable node and leaf, how many edges lead to it; a
  // node is ready once all its consumers have passed their gradient down.
  std::vector<Node*> stack{root.impl()->grad_fn.get()};
  std::unordered_map<Node*, bool> seen{{stack.back(), true}};
  std::unordered_map<TensorImpl*, int> leaf_pending;
  int checkpoints_left = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    ENGINE_CHECK(n->backward, "backward: the graph through '", n->name, "' was already freed by an earlier backward()");
    if (n->nested_backward) ++checkpoints_left;
    for (Edge& e : n->next) {
      if (e.fn) {
        ++e.fn->pending;
        if (!seen[e.fn.get()]) {
          seen[e.fn.get()] = true;
          stack.push_back(e.fn.get());
        }
      } else if (e.leaf) {
        ++leaf_pending[e.leaf.get()];
      }
    }
  }

  // Leaves whose contributions (from this graph or a nested one) are complete
  // but whose hooks wait for the remaining checkpoint nodes.
  std::vector<std::shared_ptr<TensorImpl>> finished;
  struct Restore {
    std::vector<std::shared_ptr<TensorImpl>>* prev;
    ~Restore() { g_finished_leaves = prev; }
  } restore{g_finished_leaves};
  if (!nested) g_finished_leaves = &finished;
  auto leaf_done = [&](const std::shared_ptr<TensorImpl>& leaf) {
    if (nested || checkpoints_left > 0)
      g_finished_leaves->push_back(leaf);
    else
      fire_final_hooks(leaf.get());
  };
  auto flush = [&] {  // each held-back leaf once, unless this graph still owes it a contribution
    std::unordered_map<TensorImpl*, bool> fired;
    for (const auto& leaf : finished) {
      auto it = leaf_pending.find(leaf.get());
      if ((it == leaf_pending.end() || it->second == 0) && !fired[leaf.get()]) {
        fired[leaf.get()] = true;
        fire_final_hooks(leaf.get());
      }
    }
    finished.clear();
  };

  std::vector<std::shared_ptr<Node>> ready{root.impl()->grad_fn};
  ready.back()->grad_out = seed;
  profile::BackwardLayers layers;  // a profiler range per layer, as its nodes run
  while (!ready.empty()) {
    std::shared_ptr<Node> n = std::move(ready.back());
    ready.pop_back();
    layers.enter(n->layer);
    std::vector<bool> needs;
    for (const Edge& e : n->next) needs.push_back(e.live());
    std::vector<Tensor> grads;
    std::vector<char> taken(n->next.size(), 0);
    {
      // Only the root's node sees its seed as known: further down a gradient
      // may be the seed passed through and summed into in place.
      struct Known {
        const TensorImpl* prev_seed = t_known_seed;
        double prev_value = t_known_value;
        Node* prev_running = t_running;
        std::vector<char>* prev_taken = t_taken;
        ~Known() {
          t_known_seed = prev_seed, t_known_value = prev_value;
          t_running = prev_running, t_taken = prev_taken;
        }
      } restore_known;
      const bool root_node = n == root.impl()->grad_fn;
      t_known_seed = root_node && known ? n->grad_out.impl() : nullptr;
      t_known_value = known.value_or(0);
      t_running = n.get(), t_taken = &taken;
      grads = n->backward(n->grad_out, needs);
    }
    if (n->nested_backward && --checkpoints_left == 0 && !nested) flush();
    n->backward = nullptr;  // frees the saved tensors now, not at the end
    n->grad_epilogue = nullptr;
    n->grad_out = Tensor();
    ENGINE_CHECK(grads.size() == n->next.size(), "backward of '", n->name, "' returned ", grads.size(),
                 " gradients for ", n->next.size(), " inputs");
    for (size_t i = 0; i < n->next.size(); ++i) {
      Edge& e = n->next[i];
      if (!e.live()) continue;
      const Tensor& g = grads[i];
      // A cast of fp32 takes an fp32 gradient too (takes_wide_grad).
      const bool wide = e.fn && e.fn->accepts_wide_grad && g.dtype() == DType::f32;
      ENGINE_CHECK(g.defined() && g.shape() == e.shape && (g.dtype() == e.dtype || wide), "backward of '", n->name,
                   "': gradient ", g.desc(), " for input ", i, " of shape ", shape_str(e.shape), " (",
                   dtype_name(e.dtype), ")");
      if (e.fn) {
        Node* up = e.fn.get();
        ENGINE_CHECK(!up->grad_out.defined() || taken[i] || up->grad_out.dtype() == g.dtype(), "backward of '", n->name,
                     "': an ", dtype_name(g.dtype()), " gradient for input ", i, " adds to an ",
                     dtype_name(up->grad_out.dtype()), " one (takes_wide_grad: a sole contributor only)");
        if (!up->grad_out.defined() || taken[i])  // taken: g already holds the pending gradient
          up->grad_out = g;
        else if (sole_owner(up->grad_out))
          add_(up->grad_out, g);
        else
          up->grad_out = add(up->grad_out, g);
        if (--up->pending == 0) ready.push_back(e.fn);
      } else {
        if (taken[i] || n->passes_master_grad)  // added into in place (take_leaf_grad, take_master_grad)
          ENGINE_CHECK(is_leaf_grad(g, e.leaf.get()), "backward of '", n->name, "': input ", i,
                       "'s gradient was added into in place, and another tensor came back");
        else
          accumulate_leaf(e.leaf.get(), std::move(grads[i]));
        if (--leaf_pending[e.leaf.get()] == 0) leaf_done(e.leaf);
      }
    }
    n->next.clear();
  }
  if (!nested) flush();
}

Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return fn(inputs);
  Tensor out;
  {
    NoGradGuard ng;
    out = fn(inputs).detach();  // detach: fn may return one of its inputs as is
  }
  // Recorded even when no input requires grad: the parameters used inside fn
  // are not inputs, and they still need their gradients.
  record_always("checkpoint", out, inputs, [fn, inputs](const Tensor& g, const std::vector<bool>& needs) {
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor d = inputs[i].detach();
      if (needs[i]) d.set_requires_grad(true);
      leaves.push_back(d);
    }
    EnableGradGuard eg;
    Tensor y = fn(leaves);
    if (y.requires_grad()) run_backward(y, g);
    std::vector<Tensor> grads;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (needs[i] && !leaves[i].grad().defined())
        grads.push_back(Tensor::zeros(inputs[i].shape(), inputs[i].dtype(), inputs[i].device()));
      else
        grads.push_back(needs[i] ? leaves[i].grad() : Tensor());
    }
    return grads;
  });
  out.impl()->grad_fn->nested_backward = true;
  return out;
}

}  // namespace eng
