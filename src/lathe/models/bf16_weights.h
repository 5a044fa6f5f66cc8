// bf16 mixed-precision training (specs/pretrain.md §2.4): bf16 compute copies of the decoder's matmul
// weights (attention and dense-MLP projections, the LM head / tied embedding), written from the f32
// master weights with stochastic rounding after every optimizer step. The optimizer, checkpoints and
// gradients see only the f32 masters; the matmuls read the copies through a per-forward weight view.
// Not copied: norms, biases, embedding lookups (no matmul) and MoE router / expert weights (the moe op is f32).
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/models/weights.h"

namespace lathe {

class Bf16ComputeWeights {
 public:
  // One uninitialised bf16 copy per matmul weight of master (call round_from before use).
  explicit Bf16ComputeWeights(ModelWeights& master);
  Bf16ComputeWeights(const Bf16ComputeWeights&) = delete;
  Bf16ComputeWeights& operator=(const Bf16ComputeWeights&) = delete;

  // Rewrites every copy from its master by stochastic rounding; copy i draws from derive_key(key, i), so
  // the copies are a pure function of (masters, key): a resumed run rebuilds them bit for bit.
  void round_from(ModelWeights& master, uint64_t key);
  // master with each matmul weight replaced by bf16_compute_weight(master slot, copy): the matmuls read
  // bf16 and (with grad mode on) their f32 weight gradients accumulate on the master slots.
  ModelWeights view(const ModelWeights& master) const;
  int64_t n_bytes() const;

 private:
  std::vector<Tensor> copies_;  // bf16, in for_each_matmul_weight order, each its master's shape
};

}  // namespace lathe
