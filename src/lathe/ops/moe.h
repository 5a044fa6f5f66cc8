// Sparse mixture-of-experts MLP as transformers' Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock:
// softmax router, top-k experts per token, SwiGLU experts run as GEMMs over each expert's token group.
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// Experts use SiLU (Qwen3-MoE, Mixtral, Qwen2-MoE without the shared expert); another activation would
// take an Activation field here (ops/activation.h).
struct MoeOptions {
  int top_k = 2;                // K experts per token
  bool norm_topk_prob = false;  // renormalise the K weights to sum 1 (Qwen3-MoE config; Mixtral: true)
};

// x [N, C], router [E, C], w_gate and w_up [E, F, C], w_down [E, C, F], all f32 -> [N, C].
// p = softmax(x·routerᵀ) in f32; the K largest (ties: lowest expert index first, as torch.topk) with
// weights p_k (or p_k / Σ p_k); out = Σ_k weight_k · w_down[e]·(silu(w_gate[e]·x) ⊙ w_up[e]·x), summed in
// ascending expert index like the reference loop. Differentiable in x, router and all expert weights;
// the router gradient flows through the softmax and normalisation, not through the discrete choice.
Tensor moe(const Tensor& x, const Tensor& router, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down,
           const MoeOptions& opt);

}  // namespace lathe
