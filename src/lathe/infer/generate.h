// Single-sequence generation with the KV cache: prefill the prompt in one forward, then one token per
// step. (Batched serving over a paged cache is the serving engine's job.)
#pragma once

#include <functional>
#include <vector>

#include "lathe/infer/sampler.h"
#include "lathe/models/model.h"

namespace lathe {

struct GenerateOptions {
  int max_new_tokens = 32;
  int min_new_tokens = 0;         // stop tokens are ignored before this many
  SamplingOptions sampling;
  std::vector<int> stop_token_ids;  // e.g. the config's eos ids
  std::function<void(int32_t token)> on_token;  // streaming callback, called per new token
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t n_prompt = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

GenerateResult generate(Model& model, const std::vector<int32_t>& prompt, const GenerateOptions& opts);

}  // namespace lathe
