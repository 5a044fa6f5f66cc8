#include "lathe/infer/generate.h"

#include <algorithm>
#include <chrono>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"

namespace lathe {

GenerateResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts) {
  LATHE_CHECK_ARG(!prompt.empty(), "[generate] empty prompt");
  LATHE_CHECK_ARG(opts.max_new_tokens >= 0, "[generate] max_new_tokens must be >= 0, got ", opts.max_new_tokens);
  LATHE_CHECK_ARG(opts.min_new_tokens >= 0, "[generate] min_new_tokens must be >= 0, got ", opts.min_new_tokens);
  Sampler sampler(opts.sampling);  // checks the sampling options before any work
  // Positions the cache holds: the prompt and every sampled token but the last, which is never fed back.
  const int64_t n_ctx = model.config().max_positions;
  const int64_t n_fed = static_cast<int64_t>(prompt.size()) + std::max(0, opts.max_new_tokens - 1);
  LATHE_CHECK_ARG(n_fed <= n_ctx, "[generate] prompt (", prompt.size(), " tokens) + max_new_tokens (",
                  opts.max_new_tokens, ") needs ", n_fed, " positions, beyond the model's context of ", n_ctx,
                  " (max_position_embeddings)");
  check_token_ids(prompt, model.config().vocab_size, "[generate] prompt");
  NoGradGuard no_grad;
  using clock = std::chrono::steady_clock;
  GenerateResult r;
  r.tokens = prompt;
  r.n_prompt = static_cast<int64_t>(prompt.size());
  KvCache cache = model.make_cache(n_fed);
  const int64_t V = model.config().vocab_size;

  auto t0 = clock::now();
  Tensor logits = model.forward_cached(prompt, cache);
  r.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  t0 = clock::now();
  for (int i = 0; i < opts.max_new_tokens; ++i) {
    const int32_t next = sampler.sample(logits.data<float>(), V);
    r.tokens.push_back(next);
    if (opts.on_token) opts.on_token(next);
    const bool stop = i + 1 >= opts.min_new_tokens &&
                      std::find(opts.stop_token_ids.begin(), opts.stop_token_ids.end(), next) != opts.stop_token_ids.end();
    if (stop || i + 1 == opts.max_new_tokens) break;
    logits = model.forward_cached({next}, cache);
  }
  r.decode_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return r;
}

}  // namespace lathe
