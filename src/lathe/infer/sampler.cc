#include "lathe/infer/sampler.h"

#include <algorithm>
#include <limits>

#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/infer/logits_processors.h"
#include "lathe/infer/logprobs.h"

namespace lathe {
namespace {

// U(seed, t) in [0, 1) with 53 random bits: a pure function of the sequence's seed and output position.
double uniform_at(uint64_t seed, int64_t step) {
  CounterRng g{.key = derive_key(seed, static_cast<uint64_t>(step))};
  return static_cast<double>(g.next_u64() >> 11) * 0x1.0p-53;
}

}  // namespace

Sampler::Sampler(int64_t vocab) : vocab_(vocab) {
  LATHE_CHECK_ARG(vocab > 0, "[sampler] vocabulary size must be > 0, got ", vocab);
}

void Sampler::ensure_scratch(size_t n_workers) {
  const auto V = static_cast<size_t>(vocab_);
  while (scratch_.size() < n_workers) {
    Scratch& w = scratch_.emplace_back();
    w.z.resize(V);
    w.e.resize(V);
    w.ids.resize(V);
    w.counts.assign(V, 0);
    w.pairs.resize(V);
    w.block_sums.resize((V + kSampleBlock - 1) / kSampleBlock);
  }
}

size_t Sampler::heap_bytes() const {
  size_t b = scratch_.capacity() * sizeof(Scratch);
  for (const Scratch& w : scratch_)
    b += (w.z.capacity() + w.e.capacity()) * sizeof(float) + (w.ids.capacity() + w.counts.capacity()) * sizeof(int32_t) +
         w.pairs.capacity() * sizeof(MassId) + w.block_sums.capacity() * sizeof(double);
  return b;
}

void Sampler::sample(const float* logits, std::span<SamplingState* const> states, std::span<SampledToken> out) {
  LATHE_CHECK_ARG(out.size() == states.size(), "[sampler] ", states.size(), " states but ", out.size(), " outputs");
  for (const SamplingState* s : states)
    LATHE_CHECK_ARG(s && s->vocab() == vocab_, "[sampler] a state's vocabulary is not the sampler's ", vocab_);
  const auto B = static_cast<int64_t>(states.size());
  const ThreadPool& pool = current_context().pool;
  const int n_workers = B < 2 ? 1 : std::min<int>(pool.n_threads(), static_cast<int>(B));
  ensure_scratch(static_cast<size_t>(n_workers));
  auto row = [&](int64_t b, int worker) { sample_row(logits + b * vocab_, *states[b], scratch_[worker], out[b]); };
  if (n_workers == 1) {
    for (int64_t b = 0; b < B; ++b) row(b, 0);
  } else {
    pool.parallel_for(B, row);
  }
}

void Sampler::sample_row(const float* x, SamplingState& s, Scratch& w, SampledToken& out) {
  const SamplingParams& p = s.params();
  const int64_t V = vocab_;
  float* z = w.z.data();
  float* e = w.e.data();
  const bool edits = !p.allowed_token_ids.empty() || !p.bad_words_token_ids.empty() ||
                     static_cast<int64_t>(s.output().size()) < p.min_tokens || !p.logit_bias.empty() ||
                     p.repetition_penalty != 1.f || p.frequency_penalty != 0.f || p.presence_penalty != 0.f;
  const float* processed = z;  // the logits sampled from
  if (edits || !is_greedy(p)) {
    copy_allowed_logits(s, x, z);
    apply_bad_words(s, z);
    apply_min_tokens_and_logit_bias(s, z);
    apply_penalties(s, z, w.counts);
  } else {
    processed = x;  // plain greedy reads the model's row as it is (no copy)
  }
  int32_t token;
  if (is_greedy(p)) {
    token = argmax_lowest(processed, V);
  } else {
    const float m = apply_temperature_and_exp(z, e, V, p.temperature);
    if (!(m > -std::numeric_limits<float>::infinity())) {
      token = argmax_lowest(z, V);  // every token masked or -inf: nothing to draw from
    } else {
      if (p.min_p > 0.f) apply_min_p(z, e, V, p.min_p);
      const bool top_k = p.top_k > 0 && p.top_k < V;
      if (top_k) apply_top_k(z, e, V, p.top_k, w.ids.data());
      if (p.top_p < 1.f)
        apply_top_p(z, e, V, p.top_p, top_k ? std::span<const int32_t>(w.ids.data(), p.top_k) : std::span<const int32_t>{},
                    w.pairs);
      token = sample_inverse_cdf(e, V, uniform_at(s.seed(), static_cast<int64_t>(s.output().size())), w.block_sums);
    }
  }
  out = {.token = token};
  if (p.logprobs) {
    // Raw: the model's logits as given; processed: z, which now holds every edit above (filtered: -inf).
    const float* src = p.logprobs_mode == LogprobsMode::kRaw ? x : processed;
    const RankedLogprob r = token_logprobs_top_k(src, V, token, *p.logprobs, s.top_buffer(), w.ids);
    out.logprob = r.logprob;
    out.rank = r.rank;
    out.top = s.top_buffer().first(static_cast<size_t>(r.n_top));
  }
  s.append(token);
}

SampledToken Sampler::prompt_logprobs(const float* logits, int32_t next_token, int k, std::span<TopLogprob> top) {
  LATHE_CHECK_ARG(next_token >= 0 && next_token < vocab_, "[sampler] prompt token id ", next_token,
                  " is outside [0, ", vocab_, ")");
  LATHE_CHECK_ARG(k >= -1 && k <= kMaxLogprobs, "[sampler] prompt_logprobs must be in [-1, 20], got ", k);
  const size_t need = (k < 0 ? static_cast<size_t>(vocab_) : static_cast<size_t>(k)) + 1;
  LATHE_CHECK_ARG(top.size() >= need, "[sampler] prompt_logprobs needs room for ", need, " entries, got ", top.size());
  ensure_scratch(1);
  const RankedLogprob r = token_logprobs_top_k(logits, vocab_, next_token, k, top, scratch_[0].ids);
  return {.token = next_token, .logprob = r.logprob, .rank = r.rank, .top = top.first(static_cast<size_t>(r.n_top))};
}

}  // namespace lathe
