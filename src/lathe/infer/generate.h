// Generation over a paged KV store (models/paged_kv_store.h): the prompts are prefilled in one forward,
// then every step decodes one token of each unfinished sequence, all of them in one ForwardBatch.
// (The serving engine's scheduler, preemption and prefix cache sit above this, on the same store.)
#pragma once

#include <atomic>
#include <functional>
#include <vector>

#include "lathe/infer/sampler.h"
#include "lathe/models/model.h"

namespace lathe {

struct GenerateOptions {
  int max_new_tokens = 32;
  int min_new_tokens = 0;         // stop tokens are ignored before this many
  SamplingOptions sampling;       // every sequence samples with its own Sampler of these options
  std::vector<int> stop_token_ids;  // e.g. the config's eos ids
  std::function<void(int32_t token)> on_token;  // streaming callback, called per new token (one prompt only)
  const std::atomic<bool>* cancel = nullptr;     // when set (e.g. by Ctrl-C), generation ends before the next token
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t n_prompt = 0;
  double prefill_seconds = 0, decode_seconds = 0;  // of the whole batch
};

GenerateResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts);

// The prompts generated together (one result each, in order); a sequence's tokens do not depend on
// which others share its batch.
std::vector<GenerateResult> generate_batch(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& opts);

}  // namespace lathe
