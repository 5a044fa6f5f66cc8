// Stop conditions of one sequence, checked after each appended token.
#include "lathe/serve/sched/sched_request.h"

#include <algorithm>

namespace lathe {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone:
    case FinishReason::kCount: break;
  }
  return "?";
}

std::optional<FinishReason> check_stop(const SchedSeq& s, std::span<const int32_t> eos_token_ids, int64_t max_model_len) {
  const int64_t n_out = s.num_output_tokens();
  // The sampler masks EOS and stop ids below min_tokens; the scheduler holds the same line in case a
  // runner samples one anyway.
  if (n_out >= s.params->min_tokens) {
    const int32_t last = s.tokens.back();
    const auto has = [last](std::span<const int32_t> ids) { return std::find(ids.begin(), ids.end(), last) != ids.end(); };
    if (!s.params->ignore_eos && has(eos_token_ids)) return FinishReason::kStop;
    if (has(s.params->stop_token_ids)) return FinishReason::kStop;
  }
  if (n_out >= s.max_output || s.num_tokens() >= max_model_len) return FinishReason::kLength;
  return std::nullopt;
}

}  // namespace lathe
