#include "lathe/infer/generate.h"

#include <algorithm>
#include <chrono>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/infer/sampler.h"
#include "lathe/models/paged_kv_store.h"

namespace lathe {

void check_sampling_options(const SamplingOptions& opts) {
  // top_k < 0 is an error here (SamplingParams reads -1 as off; generate's flag has one spelling of off).
  LATHE_CHECK_ARG(opts.top_k >= 0, "[sample] top_k must be >= 0 (0: off), got ", opts.top_k);
  check_sampling_params(to_sampling_params(opts, 1), 1);
}

SamplingParams to_sampling_params(const SamplingOptions& opts, int max_tokens) {
  return {.temperature = opts.temperature,
          .top_k = opts.top_k,
          .top_p = opts.top_p,
          .min_p = opts.min_p,
          .presence_penalty = opts.presence_penalty,
          .frequency_penalty = opts.frequency_penalty,
          .repetition_penalty = opts.repetition_penalty,
          .max_tokens = max_tokens,
          .seed = opts.seed};
}

GenerateResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts) {
  return generate_batch(model, {prompt}, opts)[0];
}

std::vector<GenerateResult> generate_batch(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& opts) {
  LATHE_CHECK_ARG(!prompts.empty(), "[generate] no prompts");
  LATHE_CHECK_ARG(opts.max_new_tokens >= 0, "[generate] max_new_tokens must be >= 0, got ", opts.max_new_tokens);
  LATHE_CHECK_ARG(opts.min_new_tokens >= 0, "[generate] min_new_tokens must be >= 0, got ", opts.min_new_tokens);
  LATHE_CHECK_ARG(!opts.on_token || prompts.size() == 1, "[generate] on_token streams one prompt, got ",
                  prompts.size());
  check_sampling_options(opts.sampling);
  const ModelConfig& c = model.config();
  // Positions the store holds per sequence: the prompt and every sampled token but the last, which is
  // never fed back.
  std::vector<int64_t> n_fed;
  int64_t n_blocks = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    LATHE_CHECK_ARG(!prompt.empty(), "[generate] empty prompt");
    const int64_t n = static_cast<int64_t>(prompt.size()) + std::max(0, opts.max_new_tokens - 1);
    LATHE_CHECK_ARG(n <= c.max_positions, "[generate] prompt (", prompt.size(), " tokens) + max_new_tokens (",
                    opts.max_new_tokens, ") needs ", n, " positions, beyond the model's context of ", c.max_positions,
                    " (max_position_embeddings)");
    check_token_ids(prompt, c.vocab_size, "[generate] prompt");
    n_fed.push_back(n);
    n_blocks += kv_blocks_for(n, kDefaultKvBlockSize);
  }
  // Stop tokens and min_new_tokens stay generate's own (a stop token is ignored, not masked, below
  // min_new_tokens, so greedy runs match the fixtures' ids); the sampler gets no min_tokens.
  const SamplingParams params = to_sampling_params(opts.sampling, std::max(1, opts.max_new_tokens));
  std::vector<SamplingState> states;
  for (const std::vector<int32_t>& prompt : prompts)
    states.emplace_back(params, SamplingStateOptions{.prompt = prompt, .seed = *params.seed, .vocab = c.vocab_size});
  Sampler sampler(c.vocab_size);
  NoGradGuard no_grad;
  PagedKvStore store(
      paged_kv_store_config(c, n_blocks, kDefaultKvBlockSize, resolve_kv_cache_dtype(opts.kv_cache_dtype, model)));
  const int64_t S = static_cast<int64_t>(prompts.size());
  std::vector<GenerateResult> r(S);
  std::vector<KvSequence> seqs;
  std::vector<SequenceChunk> chunks;  // this step's rows: the prompts, then one token per live sequence
  for (int64_t s = 0; s < S; ++s) {
    r[s].tokens = prompts[s];
    r[s].n_prompt = static_cast<int64_t>(prompts[s].size());
    seqs.push_back(store.allocate(n_fed[s]));
    chunks.push_back({.tokens = r[s].tokens, .start = 0, .block_table = store.block_table(seqs.back())});
  }
  std::vector<int64_t> live(S);  // live[j]: the sequence of chunk j (and of logits row j)
  for (int64_t s = 0; s < S; ++s) live[s] = s;

  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Tensor logits = model.forward(cached_batch(store, chunks));  // [S, V]: each prompt's last row
  const double prefill = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  std::vector<SamplingState*> rows;  // rows[j]: the state of logits row j
  std::vector<SampledToken> sampled(static_cast<size_t>(S));
  for (int i = 0; i < opts.max_new_tokens && !live.empty(); ++i) {
    if (opts.cancel && opts.cancel->load(std::memory_order_relaxed)) break;
    rows.clear();
    for (const int64_t s : live) rows.push_back(&states[s]);
    sampler.sample(logits.data<float>(), rows, std::span(sampled).first(live.size()));
    std::vector<int64_t> next_live;
    for (size_t j = 0; j < live.size(); ++j) {
      const int64_t s = live[j];
      const int32_t next = sampled[j].token;
      r[s].tokens.push_back(next);
      if (opts.on_token) opts.on_token(next);
      const bool stop = i + 1 >= opts.min_new_tokens && std::find(opts.stop_token_ids.begin(),
                                                                  opts.stop_token_ids.end(), next) != opts.stop_token_ids.end();
      if (!stop) next_live.push_back(s);
    }
    live = std::move(next_live);
    if (live.empty() || i + 1 == opts.max_new_tokens) break;
    chunks.clear();
    for (const int64_t s : live) {
      const std::vector<int32_t>& t = r[s].tokens;
      chunks.push_back({.tokens = std::span<const int32_t>(t).last(1),
                        .start = static_cast<int64_t>(t.size()) - 1,
                        .block_table = store.block_table(seqs[s])});
    }
    logits = model.forward(cached_batch(store, chunks));  // [live, V]
  }
  const double decode = std::chrono::duration<double>(clock::now() - t0).count();
  for (GenerateResult& g : r) {
    g.prefill_seconds = prefill;
    g.decode_seconds = decode;
  }
  for (const KvSequence& q : seqs) store.free(q);
  return r;
}

}  // namespace lathe
