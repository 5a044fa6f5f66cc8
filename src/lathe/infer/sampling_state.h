// Per-sequence sampling state: the request's parameters, its seed, the prompt's distinct tokens (for the
// repetition penalty) and its output so far (for presence / frequency penalties and min_tokens). Built
// once at admission with every buffer sized for max_tokens, so sampling allocates nothing afterwards.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/infer/sampling_params.h"

namespace lathe {

struct TopLogprob {
  int32_t token = -1;
  float logprob = 0.f;
};

struct SamplingStateOptions {
  std::span<const int32_t> prompt;         // the prompt's token ids (repetition_penalty counts them)
  std::span<const int32_t> eos_token_ids;  // masked with stop_token_ids below min_tokens, unless ignore_eos
  uint64_t seed = 0;                       // resolve_seed(params, engine generator)
  int64_t vocab = 0;                       // V
};

class SamplingState {
 public:
  // Checks `params` against the vocabulary (check_sampling_params) and the prompt's ids.
  SamplingState(const SamplingParams& params, const SamplingStateOptions& o);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }
  int64_t vocab() const { return vocab_; }
  std::span<const int32_t> output() const { return output_; }              // sampled tokens so far
  std::span<const int32_t> prompt_distinct() const { return prompt_distinct_; }  // sorted; empty if r == 1
  std::span<const int32_t> min_tokens_mask() const { return min_tokens_mask_; }  // EOS ∪ stop_token_ids
  std::span<TopLogprob> top_buffer() { return top_; }  // logprobs + 1 entries (V + 1 for -1), else empty

  // Appends an accepted output token (the sampler does this for every token it samples).
  void append(int32_t token) { output_.push_back(token); }

  size_t heap_bytes() const;  // capacity of every buffer: constant once built (the no-allocation test)

 private:
  SamplingParams params_;
  uint64_t seed_ = 0;
  int64_t vocab_ = 0;
  std::vector<int32_t> output_;           // [n_output], reserved max_tokens
  std::vector<int32_t> prompt_distinct_;  // [distinct prompt ids]
  std::vector<int32_t> min_tokens_mask_;  // ids masked while n_output < min_tokens
  std::vector<TopLogprob> top_;           // the last sample's top logprobs
};

}  // namespace lathe
