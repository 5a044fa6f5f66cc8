#include "lathe/train/optim_params.h"

#include <set>
#include <string>

namespace lathe::train {

std::vector<OptimParam> optim_params(Model& m, bool decay_embeddings) {
  std::vector<OptimParam> out;
  std::set<TensorImpl*> seen;
  const TensorImpl* embed = m.weights().embed.impl();
  const TensorImpl* pos = m.weights().pos_embed.defined() ? m.weights().pos_embed.impl() : nullptr;
  for (const TensorBinding& b : m.bindings()) {
    for (size_t i = 0; i < b.slots.size(); ++i) {
      Tensor* t = b.slots[i];
      if (!t->defined() || !seen.insert(t->impl()).second) continue;
      const bool is_embedding = t->impl() == embed || t->impl() == pos;
      const bool decay = t->dim() >= 2 && (decay_embeddings || !is_embedding);
      out.push_back({b.slots.size() == 1 ? b.name : b.name + "#" + std::to_string(i), *t, decay});
    }
  }
  return out;
}

int64_t matmul_params(Model& m) {
  const auto& w = m.weights();
  const auto& c = m.config();
  int64_t n = 0;
  for (Tensor* t : m.parameters()) {  // each tensor once (a tied weight too)
    if (t->dim() < 2) continue;
    if (t->impl() == w.pos_embed.impl()) continue;
    if (t->impl() == w.embed.impl() && !c.tie_embeddings) continue;  // lookup only; the head is separate
    if (t->dim() == 3 && c.n_experts > 0) {
      n += t->numel() * c.top_k / c.n_experts;
      continue;
    }
    n += t->numel();
  }
  return n;
}

}  // namespace lathe::train
