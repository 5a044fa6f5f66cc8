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

struct LinearTokenLogprobsOptions {
  int ignore_index = -100;    // rows with this target (prompt, padding): log-prob 0, entropy 0, no gradient
  float final_softcap = 0.f;  // > 0: z = cap·tanh(logits / cap) before the softmax (Gemma 2); 0: off
  bool want_entropy = false;  // also return H_i = −Σ_j p_ij log p_ij of each row's distribution
  int64_t chunk_size = 4096;  // vocabulary rows per chunk: extra memory is [N, chunk_size] f32
  // As LinearCrossEntropyOptions: all chunk logits are kept for the backward when they fit in this many
  // bytes (saving one head GEMM); above it they are recomputed. 0: always recompute.
  int64_t keep_logits_bytes = int64_t{256} << 20;
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
// Deterministic for a given thread count.
TokenLogprobs linear_token_logprobs(const Tensor& hidden, const Tensor& weight, const Tensor& targets,
                                    const LinearTokenLogprobsOptions& options = {});

}  // namespace lathe
