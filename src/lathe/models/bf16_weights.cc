// Bf16ComputeWeights (see bf16_weights.h).
#include "lathe/models/bf16_weights.h"

#include "lathe/base/rng.h"
#include "lathe/ops/cast.h"

namespace lathe {
namespace {

// Calls fn(slot) for every defined matmul weight the decoder passes to linear / linear_cross_entropy,
// in a fixed order. W is ModelWeights or const ModelWeights.
template <class W, class Fn>
void for_each_matmul_weight(W& w, Fn&& fn) {
  for (auto& l : w.layers)
    for (auto* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (t->defined()) fn(*t);
  if (w.lm_head.defined()) fn(w.lm_head);
}

}  // namespace

Bf16ComputeWeights::Bf16ComputeWeights(ModelWeights& master) {
  for_each_matmul_weight(master, [&](Tensor& t) {
    LATHE_CHECK_ARG(t.dtype() == DType::kF32, "[bf16 compute] master weights must be f32, got ",
                    dtype_name(t.dtype()));
    copies_.push_back(Tensor::empty(t.shape(), DType::kBF16));
  });
}

void Bf16ComputeWeights::round_from(ModelWeights& master, uint64_t key) {
  size_t i = 0;
  for_each_matmul_weight(master, [&](Tensor& t) {
    stochastic_round_bf16(t.contiguous(), copies_[i], derive_key(key, i));
    ++i;
  });
  LATHE_ASSERT(i == copies_.size(), "the model's matmul weights changed since the bf16 copies were made");
}

ModelWeights Bf16ComputeWeights::view(const ModelWeights& master) const {
  ModelWeights v = master;  // tensor handles: no data is copied
  size_t i = 0;
  for_each_matmul_weight(v, [&](Tensor& t) { t = bf16_compute_weight(t, copies_[i++]); });
  return v;
}

int64_t Bf16ComputeWeights::n_bytes() const {
  int64_t n = 0;
  for (const Tensor& c : copies_) n += static_cast<int64_t>(c.nbytes());
  return n;
}

}  // namespace lathe
