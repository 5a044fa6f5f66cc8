#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"

namespace lathe {
namespace {
thread_local bool tls_grad_enabled = true;
thread_local const LeafGradHook* tls_leaf_grad_hook = nullptr;

// dst += src, both contiguous f32 of the same shape. Split over the pool: a tied embedding's or a
// residual stream's gradient is tens of MB, and a one-thread loop left the other workers idle.
void add_into(Tensor& dst, const Tensor& src) {
  LATHE_ASSERT(dst.shape() == src.shape(), "gradient shape ", shape_str(src.shape()), " vs ",
               shape_str(dst.shape()));
  Tensor s = src.contiguous();
  float* d = dst.data<float>();
  const float* p = s.data<float>();
  const int64_t n = dst.numel();
  constexpr int64_t kMinPerTask = int64_t{1} << 16;  // below this a thread wake-up costs more than the adds
  const ThreadPool& pool = current_context().pool;
  const int64_t n_tasks = std::clamp<int64_t>(n / kMinPerTask, 1, pool.n_threads());
  auto add_range = [&](int64_t t, int) {
    const int64_t b = n * t / n_tasks, e = n * (t + 1) / n_tasks;
#pragma omp simd
    for (int64_t i = b; i < e; ++i) d[i] += p[i];
  };
  if (n_tasks == 1)
    add_range(0, 0);
  else
    pool.parallel_for(n_tasks, add_range);
}

// A gradient tensor we may write into: owned, contiguous and not aliased by a saved forward tensor.
Tensor writable(const Tensor& g) {
  if (g.is_contiguous() && g.storage().use_count() == 1 && g.impl_ptr().use_count() == 1) return g;
  return g.clone();
}
}  // namespace

bool grad_enabled() { return tls_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = previous_; }
EnableGradGuard::EnableGradGuard() : previous_(tls_grad_enabled) { tls_grad_enabled = true; }
EnableGradGuard::~EnableGradGuard() { tls_grad_enabled = previous_; }

LeafGradHookScope::LeafGradHookScope(LeafGradHook hook) : hook_(std::move(hook)), previous_(tls_leaf_grad_hook) {
  tls_leaf_grad_hook = &hook_;
}
LeafGradHookScope::~LeafGradHookScope() { tls_leaf_grad_hook = previous_; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!tls_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

void record(Tensor& output, const char* name, std::vector<Tensor> inputs, BackwardFn backward) {
  auto node = std::make_shared<Node>();
  node->name = name;
  node->output_shape = output.shape();
  node->inputs.reserve(inputs.size());
  for (Tensor& t : inputs) {
    GradEdge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn())
        e.node = t.grad_fn();
      else
        e.leaf = t.impl_ptr();
    }
    node->inputs.push_back(std::move(e));
  }
  node->backward = std::move(backward);
  output.impl()->grad_fn = std::move(node);
  output.impl()->requires_grad = true;
}

void accumulate_grad(TensorImpl& leaf, const Tensor& g) {
  if (!leaf.grad.defined()) {
    leaf.grad = g.dtype() == DType::kF32 ? writable(g) : g.to(DType::kF32);
    if (leaf.grad.shape() != leaf.shape) leaf.grad = leaf.grad.view(leaf.shape);
  } else {
    add_into(leaf.grad, g.shape() == leaf.shape ? g : g.contiguous().view(leaf.shape));
  }
}

void backward(const Tensor& loss) {
  LATHE_CHECK_ARG(loss.defined() && loss.numel() == 1, "[backward] needs a single-element tensor, got ",
                  loss.defined() ? shape_str(loss.shape()) : "undefined");
  backward(loss, Tensor::full(loss.shape(), 1.0f));
}

void backward(const Tensor& loss, const Tensor& grad_loss) {
  LATHE_CHECK_ARG(loss.defined() && grad_loss.defined() && grad_loss.numel() == loss.numel(),
                  "[backward] the output gradient must have the output's shape");
  LATHE_CHECK_ARG(loss.requires_grad(), "[backward] the tensor does not require grad (no recorded graph)");
  NoGradGuard no_grad;  // gradient rules compose ops; they must not record

  // A gradient's destination is keyed by its node, or by the leaf for a leaf.
  auto key = [](const GradEdge& e) -> const void* {
    return e.node ? static_cast<const void*>(e.node.get()) : static_cast<const void*>(e.leaf.get());
  };
  const GradEdge root = loss.grad_fn() ? GradEdge{.node = loss.grad_fn()} : GradEdge{.leaf = loss.impl_ptr()};

  // Reverse topological order of the nodes reachable from loss (iterative DFS: graphs are deep).
  // `order` owns its nodes: releasing one below drops its saved tensors and its edges, which may hold the
  // last references to nodes (and their saved tensors) still waiting in `order`.
  std::vector<GradEdge> order;
  std::unordered_set<const void*> seen{key(root)};
  std::vector<std::pair<GradEdge, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    Node* n = stack.back().first.node.get();
    size_t& next = stack.back().second;
    if (n && next < n->inputs.size()) {
      const GradEdge& in = n->inputs[next++];
      if (in.defined() && seen.insert(key(in)).second) stack.push_back({in, 0});
      continue;
    }
    if (n)
      LATHE_CHECK_ARG(n->backward != nullptr, "[backward] the graph through ", n->name,
                      " was already released by an earlier backward (run the forward again)");
    order.push_back(std::move(stack.back().first));
    stack.pop_back();
  }
  std::reverse(order.begin(), order.end());

  std::unordered_map<const void*, Tensor> pending;
  pending[key(root)] = grad_loss;
  for (GradEdge& e : order) {
    auto it = pending.find(key(e));
    if (it == pending.end()) continue;
    Tensor g = std::move(it->second);
    pending.erase(it);
    if (e.leaf) {
      accumulate_grad(*e.leaf, g);
      if (tls_leaf_grad_hook) (*tls_leaf_grad_hook)(*e.leaf);
      continue;
    }
    Node& node = *e.node;
    std::vector<Tensor> grads = node.backward(g);
    LATHE_ASSERT(grads.size() == node.inputs.size(), "node ", node.name, " returned ", grads.size(),
                 " gradients for ", node.inputs.size(), " inputs");
    for (size_t i = 0; i < grads.size(); ++i) {
      const GradEdge& in = node.inputs[i];
      if (!in.defined() || !grads[i].defined()) continue;
      const Shape& in_shape = in.node ? in.node->output_shape : in.leaf->shape;
      LATHE_ASSERT(grads[i].numel() == shape_numel(in_shape), "node ", node.name, " input ", i,
                   " gradient shape ", shape_str(grads[i].shape()), " vs ", shape_str(in_shape));
      auto [slot, fresh] = pending.try_emplace(key(in));
      if (fresh)
        slot->second = grads[i];
      else {
        slot->second = writable(slot->second);
        add_into(slot->second, grads[i].shape() == slot->second.shape() ? grads[i]
                                                                        : grads[i].contiguous().view(slot->second.shape()));
      }
    }
    // Release this node's saved tensors and edges now: activation memory falls as the backward proceeds
    // (an intermediate tensor the caller still holds keeps only the emptied node).
    node.backward = nullptr;
    node.inputs.clear();
    e.node.reset();
  }
  loss.impl()->grad_fn.reset();
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  if (!tls_grad_enabled) return fn(x);
  Tensor out;
  {
    NoGradGuard no_grad;  // nothing inside fn is recorded or kept: only x stays alive
    out = fn(x);
  }
  record(out, "checkpoint", {x}, [fn, x](const Tensor& grad_out) -> std::vector<Tensor> {
    // Recompute with recording on (backward() runs its rules with grad mode off), from a detached
    // input, then backpropagate the incoming gradient through the recomputed graph: the parameters
    // used by fn receive their gradients here, and x's gradient is returned to the outer graph.
    EnableGradGuard enable;
    Tensor xd = x.detach();
    xd.set_requires_grad(true);
    Tensor y = fn(xd);
    if (!y.requires_grad()) return {Tensor()};
    backward(y, grad_out);
    return {xd.grad()};
  });
  return out;
}

}  // namespace lathe
