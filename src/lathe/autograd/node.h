// The autograd tape: every differentiable op that sees an input requiring grad records a Node on its
// output. backward() walks the nodes in reverse topological order. With grad mode off (NoGradGuard, or
// no input requiring grad) an op records nothing and pays one branch.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe {

// Gradient rule: given d(loss)/d(output), returns d(loss)/d(input_i) for each recorded input, in the
// order the inputs were recorded. An entry may be left undefined when that input needs no gradient.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node;

// Where the gradient of one recorded input goes: the node that produced it, or, for a leaf (a parameter,
// or a tensor the caller marked requires_grad), the leaf itself. An edge never owns an op output's
// storage: an intermediate tensor (a base Linear's output before a LoRA delta is added to it, an f32
// activation cast to bf16) is freed when the forward drops it, unless a gradient rule saved it.
struct GradEdge {
  std::shared_ptr<Node> node;        // set for an op's output
  std::shared_ptr<TensorImpl> leaf;  // set for a leaf that requires grad
  bool defined() const { return node || leaf; }
};

struct Node {
  std::string name;              // op name, for errors and debugging
  Shape output_shape;            // the recorded output's shape: what its incoming gradient must match
  std::vector<GradEdge> inputs;  // where each input's gradient goes (empty edge: the input needs none)
  BackwardFn backward;           // null once backward() has run through the node (the graph is released)
};

bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Turns recording back on inside a region (e.g. a recompute during backward).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// True when grad mode is on and any input requires grad: the op must record.
bool needs_grad(std::initializer_list<const Tensor*> inputs);

// Attaches a node to `output` (which then requires grad). Inputs that do not require grad are recorded
// too (so the rule's result vector lines up) but receive nothing.
void record(Tensor& output, const char* name, std::vector<Tensor> inputs, BackwardFn backward);

// Runs the backward pass from a single-element tensor, accumulating into the .grad() of every leaf that
// requires grad. Intermediate gradients are freed as soon as they are consumed. The graph is released.
void backward(const Tensor& loss);
// The same from any output, given d(loss)/d(output) (same number of elements).
void backward(const Tensor& output, const Tensor& grad_output);

// Activation recompute (specs/pretrain.md §2.5): returns fn(x) computed without keeping fn's
// intermediate tensors; during backward fn is run again on x, recording, and the incoming gradient is
// propagated through it. fn must be deterministic (the recompute is bit-identical to the first run) and
// may use parameters, which receive their gradients during that recompute.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x);

// Accumulates `g` into the leaf tensor's gradient (first time: adopts g without copying).
void accumulate_grad(TensorImpl& leaf, const Tensor& g);

// Called by backward() right after it has added a leaf's gradient: the walk reaches a leaf once, after
// every use of it in the graph has been summed (a tied embedding fires once, after both uses). A leaf used
// inside a recomputed region fires from that region's inner backward. Data parallel training uses it to
// start reducing a gradient while the backward goes on (train/grad_bucketer.h).
using LeafGradHook = std::function<void(TensorImpl& leaf)>;

// Installs a hook for the backward() calls of this thread while alive (scoped, like NoGradGuard).
class LeafGradHookScope {
 public:
  explicit LeafGradHookScope(LeafGradHook hook);
  ~LeafGradHookScope();
  LeafGradHookScope(const LeafGradHookScope&) = delete;
  LeafGradHookScope& operator=(const LeafGradHookScope&) = delete;

 private:
  LeafGradHook hook_;
  const LeafGradHook* previous_;
};

}  // namespace lathe
