// Per-token log-probabilities log_softmax(logits)[i, ids[i]]: the quantity every post-training loss
// (DPO, GRPO/PPO ratios, KL to a reference) is built from; on materialised logits, and fused with the
// head matmul so that the [N, V] logits are never held (600 KB per token at V = 150K).
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// out[...] = logits[..., ids[...]] − logsumexp(logits[..., :]).  logits [..., V] f32; ids [...] i32 in
// [0, V) (else InvalidArgument naming the id) -> out [...] f32. Gradient: dlogits[i] = g_i·(onehot −
// softmax(logits[i])), softmax recomputed in backward from the saved logits and lse [N].
Tensor token_logprobs(const Tensor& logits, const Tensor& ids);

// The sampler's processing of each row's distribution (infer/logit_filters.h, after the final soft-cap):
// z / temperature, then top-k (the k best-ranked tokens: larger z first, lower id first), then top-p over the
// survivors (the smallest best-ranked set whose mass reaches top_p of theirs). Log-probs and entropy are then
// of the renormalised distribution over the kept tokens, the one the sampler drew from, so a trainer replays
// the sampler's log-probs exactly up to kernel differences (specs/posttrain.md §5.6, trl#6789). A target
// outside its row's kept set (the sampler ranked the boundary differently) joins it, so its log-prob stays
// finite. For the gradient the kept set is a constant (it only moves where two logits cross).
struct LogprobProcessing {
  float temperature = 1.f;  // > 0
  int64_t top_k = 0;        // >= 0; 0 or >= V: off
  float top_p = 1.f;        // (0, 1]; 1: off
  bool truncates(int64_t v) const { return (top_k > 0 && top_k < v) || top_p < 1.f; }
  bool is_identity(int64_t v) const { return temperature == 1.f && !truncates(v); }
};

struct LinearTokenLogprobsOptions {
  int ignore_index = -100;    // rows with this target (prompt, padding): log-prob 0, entropy 0, no gradient
  float final_softcap = 0.f;  // > 0: z = cap·tanh(logits / cap) before the softmax (Gemma 2); 0: off
  bool want_entropy = false;  // also return H_i = −Σ_j p_ij log p_ij of each row's distribution
  int64_t chunk_size = 4096;  // vocabulary rows per chunk: extra memory is [N, chunk_size] f32
  // As LinearCrossEntropyOptions: all chunk logits are kept for the backward when they fit in this many
  // bytes (saving one head GEMM); above it they are recomputed. 0: always recompute.
  int64_t keep_logits_bytes = int64_t{256} << 20;
  LogprobProcessing processing;  // the sampler's temperature / top-k / top-p (default: the model's distribution)
};

struct TokenLogprobs {
  Tensor logprobs;  // [N] f32
  Tensor entropy;   // [N] f32; undefined unless want_entropy
};

// token_logprobs(linear(hidden, weight), targets) fused, vocabulary-chunked with an online log-sum-exp
// (as linear_cross_entropy: peak extra memory one [N, chunk] block), plus the optional entropy. hidden
// [N, C] f32 (or bf16 with a bf16 weight: bf16 compute); weight [V, C] f32, bf16 or f16 (16-bit: a gradient only as a
// bf16_compute_weight copy; f16 with an f32 hidden); targets [N] i32 in [0, V) or == ignore_index (else InvalidArgument).
// Differentiable in hidden and weight through both outputs: one backward walk over the chunks with
// dz_ij = g_i·([j == t_i] − p_ij) − gH_i·p_ij·(log p_ij + H_i), times 1 − (z_ij/cap)² under a cap.
// With a processing other than the identity, z / T replaces z over the kept set K_i of each row (p_ij = 0 off
// it; dz_ij gains the factor 1/T). A top-p without top-k walks the head twice (the second pass gathers the
// candidates: tokens with p >= (1 − top_p)/V, which hold every nucleus). Deterministic for a given thread count.
TokenLogprobs linear_token_logprobs(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                                    const LinearTokenLogprobsOptions& options = {});

}  // namespace lathe
