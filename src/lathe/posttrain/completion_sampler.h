// Where on-policy distillation's completions come from (specs/posttrain.md §6, GKD arXiv 2306.13649): a sampler
// that continues prompts with a model as it is now. Declared here so the distillation objective depends on no
// engine; the rollout layer implements it on the serving engine (rollout/engine_completion_sampler.h) and the
// CLI wires it in, as GRPO's RolloutSource.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/models/model.h"

namespace lathe::posttrain {

struct CompletionSampling {
  int64_t max_new_tokens = 128;         // output cap of every completion
  double temperature = 0.9;             // softmax(z / temperature); no top-k / top-p (TRL GKD: top_k 0)
  std::vector<int32_t> stop_token_ids;  // besides the model's eos ids; a completion ends with the first one
  uint64_t seed = 0;                    // the same prompts, weights and seed give the same completions
};

class CompletionSampler {
 public:
  virtual ~CompletionSampler() = default;
  // One completion per prompt (each non-empty), sampled from `model` as it is now (its live weights and LoRA
  // adapters): the tokens after the prompt, [1, max_new_tokens] of them, ending with a stop token or cut at
  // max_new_tokens. Autograd plays no part.
  virtual std::vector<std::vector<int32_t>> sample(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                                   const CompletionSampling& s) = 0;
  // Bytes one sample() call of `prompts` prompts of up to `longest_prompt` tokens allocates beyond the model
  // (the memory plan): an engine's KV pool.
  virtual int64_t memory_bytes(const Model& /*model*/, int64_t /*prompts*/, int64_t /*longest_prompt*/,
                               int64_t /*max_new_tokens*/) const {
    return 0;
  }
};

}  // namespace lathe::posttrain
