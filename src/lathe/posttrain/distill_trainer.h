// `lathe distill`: the shared training loop with the distillation objective, and the result as lathe sft
// leaves it: <run>/model (a Hugging Face folder) or, with a lora: section, <run>/adapter (a PEFT folder).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lathe/posttrain/completion_sampler.h"
#include "lathe/posttrain/distill_options.h"
#include "lathe/train/train_loop.h"

namespace lathe::posttrain {

// Builds the sampler of on-policy steps (distill.lmbda, seq_kd), once per run.
using MakeCompletionSampler = std::function<std::unique_ptr<CompletionSampler>()>;

class DistillTrainer {
 public:
  // cfg: a resolved recipe with a distill: section (checked now, before any run starts). make_sampler: where
  // sampled completions come from (the rollout layer's engine; unset: a recipe that samples is refused at start).
  explicit DistillTrainer(train::TrainConfig cfg, train::TrainerHooks hooks = {},
                          MakeCompletionSampler make_sampler = {});

  const DistillOptions& options() const { return opts_; }
  const train::TrainConfig& config() const { return loop_.config(); }

  // Trains to schedule.steps; after a finished run rank 0 exports the last checkpoint to output_dir().
  train::TrainResult run(train::StartMode mode);
  static void request_stop() { train::TrainLoop::request_stop(); }
  std::string output_dir() const;

 private:
  DistillOptions opts_;
  MakeCompletionSampler make_sampler_;
  train::TrainLoop loop_;
};

}  // namespace lathe::posttrain
