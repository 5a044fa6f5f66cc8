#include "lathe/infer/sampling_state.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe {

SamplingState::SamplingState(const SamplingParams& params, const SamplingStateOptions& o)
    : params_(params), seed_(o.seed), vocab_(o.vocab) {
  check_sampling_params(params, o.vocab);
  for (const int32_t id : o.prompt)
    LATHE_CHECK_ARG(id >= 0 && id < o.vocab, "[sampling] prompt token id ", id, " is outside [0, ", o.vocab, ")");
  output_.reserve(static_cast<size_t>(params.max_tokens));
  if (params.repetition_penalty != 1.f) {
    prompt_distinct_.assign(o.prompt.begin(), o.prompt.end());
    std::sort(prompt_distinct_.begin(), prompt_distinct_.end());
    prompt_distinct_.erase(std::unique(prompt_distinct_.begin(), prompt_distinct_.end()), prompt_distinct_.end());
    prompt_distinct_.shrink_to_fit();
  }
  if (params.min_tokens > 0) {
    if (!params.ignore_eos)
      for (const int32_t id : o.eos_token_ids)
        if (id >= 0 && id < o.vocab) min_tokens_mask_.push_back(id);
    min_tokens_mask_.insert(min_tokens_mask_.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  }
  if (params.logprobs) top_.resize(*params.logprobs < 0 ? static_cast<size_t>(o.vocab) + 1 : *params.logprobs + 1);
}

size_t SamplingState::heap_bytes() const {
  size_t bad_words = params_.bad_words_token_ids.capacity() * sizeof(std::vector<int32_t>);
  for (const std::vector<int32_t>& w : params_.bad_words_token_ids) bad_words += w.capacity() * sizeof(int32_t);
  return params_.logit_bias.capacity() * sizeof(params_.logit_bias[0]) +
         (params_.stop_token_ids.capacity() + params_.allowed_token_ids.capacity()) * sizeof(int32_t) + bad_words +
         (output_.capacity() + prompt_distinct_.capacity() + min_tokens_mask_.capacity()) * sizeof(int32_t) +
         top_.capacity() * sizeof(TopLogprob);
}

}  // namespace lathe
