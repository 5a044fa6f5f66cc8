// A request's sampling parameters (the OpenAI / vLLM surface, serving spec §6) and their checks. One
// SamplingParams per request; the per-sequence state built from it lives in sampling_state.h.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "lathe/base/rng.h"

namespace lathe {

inline constexpr float kGreedyTemperature = 1e-5f;  // temperature below this: greedy (argmax), as vLLM
inline constexpr int kMaxLogprobs = 20;             // top_logprobs / prompt_logprobs cap (OpenAI); -1: all
inline constexpr float kMaxPenalty = 2.f;           // presence / frequency penalties in [-2, 2]
inline constexpr float kMaxLogitBias = 100.f;       // logit_bias values in [-100, 100]

// Which logits the reported log-probabilities come from. kRaw: the model's, before any processing (vLLM
// V1's default); kProcessed: after allowed_token_ids, bad words, min_tokens, logit_bias, penalties, temperature and the top-k / top-p /
// min_p filters (filtered tokens are -inf): the distribution actually sampled from, which RL ratios need.
enum class LogprobsMode : uint8_t { kRaw, kProcessed, kCount };

struct SamplingParams {
  int n = 1;                       // choices per request (the scheduler fans out child requests), >= 1
  float temperature = 1.f;         // finite, >= 0; < kGreedyTemperature: greedy (argmax, lowest id on ties)
  int top_k = 0;                   // 0 or -1: off; else >= 1
  float top_p = 1.f;               // in (0, 1]; 1: off
  float min_p = 0.f;               // in [0, 1]; drops tokens with p < min_p · p_max; 0: off
  float presence_penalty = 0.f;    // in [-2, 2]: logit −= α·[count_out(v) > 0]
  float frequency_penalty = 0.f;   // in [-2, 2]: logit −= α·count_out(v)
  float repetition_penalty = 1.f;  // > 0; tokens in prompt or output: logit > 0 ? logit / r : logit · r
  std::vector<std::pair<int32_t, float>> logit_bias;  // {token id in [0, V), bias in [-100, 100]}
  std::vector<int32_t> allowed_token_ids;  // non-empty: only these ids (each in [0, V)) may be sampled
  // Token sequences, each non-empty with ids in [0, V): a sequence's last id is masked when the output
  // ends with its other ids (a one-token sequence always). vLLM's bad_words, tokenised by the frontend.
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  int max_tokens = 16;             // >= 1: output cap (OpenAI completions default)
  int min_tokens = 0;              // in [0, max_tokens]: EOS and stop_token_ids masked until reached
  bool ignore_eos = false;         // do not stop at (nor mask) EOS
  std::vector<int32_t> stop_token_ids;  // each in [0, V)
  std::optional<uint64_t> seed;    // none: the engine draws one at admission (resolve_seed)
  std::optional<int> logprobs;     // none: off; 0: the sampled token only; 1..20: + top-k; -1: all V
  std::optional<int> prompt_logprobs;  // as logprobs, for every prompt position but the first (raw)
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
};

// Throws InvalidArgument naming the field and its range when a parameter is outside the ranges above
// (NaN included); token ids are checked against the vocabulary size V.
void check_sampling_params(const SamplingParams& p, int64_t vocab);

inline bool is_greedy(const SamplingParams& p) { return p.temperature < kGreedyTemperature; }

// The seed a sequence samples with: the request's, else one drawn from the engine's generator at
// admission (so an unseeded request is still reproducible from the engine seed and arrival order).
inline uint64_t resolve_seed(const SamplingParams& p, CounterRng& engine_rng) {
  return p.seed ? *p.seed : engine_rng.next_u64();
}

// Why a sequence stopped (kAbort: the client went away; the scheduler's reason too, sched_request.h).
enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kCount };
// Why a sequence stops after appending `token` as its n_output-th output token (1-based), or kNone.
FinishReason finish_reason(const SamplingParams& p, std::span<const int32_t> eos_token_ids, int64_t n_output,
                           int32_t token);

}  // namespace lathe
