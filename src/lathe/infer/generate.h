// Generation over a paged KV store (models/paged_kv_store.h): the prompts are prefilled in one forward,
// then every step decodes one token of each unfinished sequence, all of them in one ForwardBatch.
// (The serving engine's scheduler, preemption and prefix cache sit above this, on the same store.)
#pragma once

#include <atomic>
#include <functional>
#include <vector>

#include "lathe/infer/sampling_params.h"
#include "lathe/models/kv_cache_dtype.h"
#include "lathe/models/model.h"

namespace lathe {

// The sampling knobs of `lathe generate` (a subset of SamplingParams, with generate's defaults: greedy).
struct SamplingOptions {
  float temperature = 0.f;         // finite, >= 0; < 1e-5 (0): greedy (argmax, lowest index on ties)
  int top_k = 0;                   // >= 0; 0: off
  float top_p = 1.f;               // in (0, 1]; 1: off
  float min_p = 0.f;               // in [0, 1]; 0: off
  float repetition_penalty = 1.f;  // > 0; 1: off
  float presence_penalty = 0.f;    // in [-2, 2]
  float frequency_penalty = 0.f;   // in [-2, 2]
  uint64_t seed = 0;               // every sequence samples with this seed (so batching cannot change it)
};

// Throws InvalidArgument naming the field when an option is outside the range above.
void check_sampling_options(const SamplingOptions& opts);

// The SamplingParams these options stand for, with max_tokens (>= 1) as the output cap.
SamplingParams to_sampling_params(const SamplingOptions& opts, int max_tokens);

struct GenerateOptions {
  int max_new_tokens = 32;
  int min_new_tokens = 0;         // stop tokens are ignored before this many
  SamplingOptions sampling;       // every sequence samples with its own SamplingState of these options
  std::vector<int> stop_token_ids;  // e.g. the config's eos ids
  std::function<void(int32_t token)> on_token;  // streaming callback, called per new token (one prompt only)
  const std::atomic<bool>* cancel = nullptr;     // when set (e.g. by Ctrl-C), generation ends before the next token
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;  // the store's K and V (auto: bf16 for bf16 weights)
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
