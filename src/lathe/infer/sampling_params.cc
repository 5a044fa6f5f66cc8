#include "lathe/infer/sampling_params.h"

#include <algorithm>
#include <cmath>

#include "lathe/base/error.h"

namespace lathe {
namespace {

void check_logprobs(const std::optional<int>& k, const char* field) {
  LATHE_CHECK_ARG(!k || (*k >= -1 && *k <= kMaxLogprobs), "[sampling] ", field, " must be in [-1, ", kMaxLogprobs,
                  "] (-1: the whole vocabulary), got ", *k);
}

}  // namespace

void check_sampling_params(const SamplingParams& p, int64_t vocab) {
  // NaN fails every comparison, so each check is written as the accepted case.
  LATHE_CHECK_ARG(vocab > 0, "[sampling] vocabulary size must be > 0, got ", vocab);
  LATHE_CHECK_ARG(p.n >= 1, "[sampling] n must be >= 1, got ", p.n);
  LATHE_CHECK_ARG(std::isfinite(p.temperature) && p.temperature >= 0.f,
                  "[sampling] temperature must be a finite number >= 0 (< 1e-5: greedy), got ", p.temperature);
  LATHE_CHECK_ARG(p.top_k >= -1, "[sampling] top_k must be >= 1, or 0 / -1 (off), got ", p.top_k);
  LATHE_CHECK_ARG(p.top_p > 0.f && p.top_p <= 1.f, "[sampling] top_p must be in (0, 1] (1: off), got ", p.top_p);
  LATHE_CHECK_ARG(p.min_p >= 0.f && p.min_p <= 1.f, "[sampling] min_p must be in [0, 1] (0: off), got ", p.min_p);
  LATHE_CHECK_ARG(p.presence_penalty >= -kMaxPenalty && p.presence_penalty <= kMaxPenalty,
                  "[sampling] presence_penalty must be in [-2, 2], got ", p.presence_penalty);
  LATHE_CHECK_ARG(p.frequency_penalty >= -kMaxPenalty && p.frequency_penalty <= kMaxPenalty,
                  "[sampling] frequency_penalty must be in [-2, 2], got ", p.frequency_penalty);
  LATHE_CHECK_ARG(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.f,
                  "[sampling] repetition_penalty must be a finite number > 0 (1: off), got ", p.repetition_penalty);
  for (const auto& [id, bias] : p.logit_bias) {
    LATHE_CHECK_ARG(id >= 0 && id < vocab, "[sampling] logit_bias token id ", id, " is outside [0, ", vocab, ")");
    LATHE_CHECK_ARG(bias >= -kMaxLogitBias && bias <= kMaxLogitBias, "[sampling] logit_bias of token ", id,
                    " must be in [-100, 100], got ", bias);
  }
  for (const int32_t id : p.allowed_token_ids)
    LATHE_CHECK_ARG(id >= 0 && id < vocab, "[sampling] allowed_token_ids: id ", id, " is outside [0, ", vocab, ")");
  for (const std::vector<int32_t>& word : p.bad_words_token_ids) {
    LATHE_CHECK_ARG(!word.empty(), "[sampling] bad_words: a banned sequence has no tokens");
    for (const int32_t id : word)
      LATHE_CHECK_ARG(id >= 0 && id < vocab, "[sampling] bad_words: token id ", id, " is outside [0, ", vocab, ")");
  }
  LATHE_CHECK_ARG(p.max_tokens >= 1, "[sampling] max_tokens must be >= 1, got ", p.max_tokens);
  LATHE_CHECK_ARG(p.min_tokens >= 0 && p.min_tokens <= p.max_tokens, "[sampling] min_tokens must be in [0, max_tokens = ",
                  p.max_tokens, "], got ", p.min_tokens);
  for (const int32_t id : p.stop_token_ids)
    LATHE_CHECK_ARG(id >= 0 && id < vocab, "[sampling] stop_token_ids: id ", id, " is outside [0, ", vocab, ")");
  check_logprobs(p.logprobs, "logprobs");
  check_logprobs(p.prompt_logprobs, "prompt_logprobs");
  LATHE_CHECK_ARG(p.logprobs_mode == LogprobsMode::kRaw || p.logprobs_mode == LogprobsMode::kProcessed,
                  "[sampling] logprobs_mode must be raw or processed");
}

FinishReason finish_reason(const SamplingParams& p, std::span<const int32_t> eos_token_ids, int64_t n_output,
                           int32_t token) {
  auto in = [token](std::span<const int32_t> ids) { return std::find(ids.begin(), ids.end(), token) != ids.end(); };
  if (n_output >= p.min_tokens && ((!p.ignore_eos && in(eos_token_ids)) || in(p.stop_token_ids)))
    return FinishReason::kStop;
  if (n_output >= p.max_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

}  // namespace lathe
