// Log-probabilities reported with a sampled (or prompt) token: log_softmax of one row of logits,
// computed stably as z_v − (max z + log Σ exp(z − max z)), for the token itself, its rank, and the k
// most likely tokens (OpenAI top_logprobs; k = -1: the whole vocabulary, as vLLM).
#pragma once

#include <cstdint>
#include <span>

#include "lathe/infer/sampling_state.h"

namespace lathe {

// log Σ_v exp(z_v), stable; -inf when every z_v is -inf.
double log_sum_exp(const float* z, int64_t V);

struct RankedLogprob {
  float logprob = 0.f;  // log_softmax(z)[token]
  int64_t rank = 0;     // 1 + the number of tokens with a larger logprob
  int64_t n_top = 0;    // entries written to `top`
};

// Writes top[0..k) = the k best tokens of z (ranked by z, then id), best first, then appends `token` when
// it is not among them: up to k + 1 entries (k = -1: all V, sorted). `top` holds k + 1 (V + 1) entries;
// `ids` [V] is scratch.
RankedLogprob token_logprobs_top_k(const float* z, int64_t V, int32_t token, int k, std::span<TopLogprob> top,
                                   std::span<int32_t> ids);

}  // namespace lathe
