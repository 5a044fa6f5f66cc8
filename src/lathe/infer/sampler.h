// Batched token sampling: one call samples a row of logits for each sequence of a step, each with its own
// SamplingParams and SamplingState. Order of application (serving spec §6, vLLM V1 Sampler): raw
// logprobs → allowed_token_ids → bad words → min_tokens, logit_bias → penalties (repetition, frequency, presence) → greedy argmax, or
// temperature → min_p → top-k → top-p → draw → top logprobs (the sampled token added).
//
// Reproducibility: the draw for a sequence's output position t is u = U(seed, t), a counter-based value
// (SplitMix64 of derive_key(seed, t), base/rng.h) with no stream state: batch composition, batch order,
// thread count and preemption-and-recompute cannot change it. The draw is an inverse CDF over the
// surviving tokens in id order (one uniform per token, no sort); see docs/sampling.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/infer/logit_filters.h"
#include "lathe/infer/sampling_state.h"

namespace lathe {

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.f;  // of token, when the request asked for logprobs (raw or processed per its mode)
  int64_t rank = 0;     // 1 + tokens with a larger logprob; 0 when logprobs are off
  std::span<const TopLogprob> top;  // top_logprobs, best first, + token if not among them (state's buffer)
};

class Sampler {
 public:
  explicit Sampler(int64_t vocab);  // V; scratch is sized per worker on first use, then reused
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // logits [B, V] f32 row-major, states [B], out [B]: row b is sampled with states[b], the token is
  // appended to it, out[b] filled (its `top` points into the state, valid until the state's next
  // sample). Rows run in parallel on the current context's workers; no allocation once warm.
  void sample(const float* logits, std::span<SamplingState* const> states, std::span<SampledToken> out);

  // Prompt logprobs of one position (always raw, as vLLM): logits [V] of the row that predicts
  // `next_token`; k as SamplingParams::prompt_logprobs. `top` holds k + 1 entries (V + 1 for k = -1).
  SampledToken prompt_logprobs(const float* logits, int32_t next_token, int k, std::span<TopLogprob> top);

  int64_t vocab() const { return vocab_; }
  size_t heap_bytes() const;  // capacity of all scratch (constant in steady state)

 private:
  struct Scratch {  // one per worker, [V] each
    std::vector<float> z, e;                // processed logits; exp(z − max)
    std::vector<int32_t> ids, counts;       // selection scratch; output counts (zero between rows)
    std::vector<MassId> pairs;              // top-p candidates
    std::vector<double> block_sums;         // [ceil(V / kSampleBlock)]
  };
  void sample_row(const float* x, SamplingState& s, Scratch& w, SampledToken& out);
  void ensure_scratch(size_t n_workers);

  int64_t vocab_;
  std::vector<Scratch> scratch_;
};

}  // namespace lathe
