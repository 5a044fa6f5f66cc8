// On-policy distillation's samples on the serving engine (specs/posttrain.md §6, DESIGN.md "Seams" 5): a
// posttrain::CompletionSampler that runs one EngineRollout per call over the prompts it is given (one completion
// each, group size 1), on the model as it is now (its live weights and LoRA adapters, no copy). The KV pool is
// sized for the call's prompts and max_new_tokens only.
#pragma once

#include <string>

#include "lathe/posttrain/completion_sampler.h"
#include "lathe/posttrain/distill_trainer.h"

namespace lathe::rollout {

class EngineCompletionSampler final : public posttrain::CompletionSampler {
 public:
  std::vector<std::vector<int32_t>> sample(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const posttrain::CompletionSampling& s) override;
  int64_t memory_bytes(const Model& model, int64_t prompts, int64_t longest_prompt,
                       int64_t max_new_tokens) const override;
};

// `lathe distill`: posttrain::DistillTrainer with its sampled steps on the serving engine.
class EngineDistillTrainer final : public posttrain::DistillTrainer {
 public:
  explicit EngineDistillTrainer(train::TrainConfig cfg, train::TrainerHooks hooks = {})
      : DistillTrainer(std::move(cfg), std::move(hooks), [] { return std::make_unique<EngineCompletionSampler>(); }) {}
};

}  // namespace lathe::rollout
