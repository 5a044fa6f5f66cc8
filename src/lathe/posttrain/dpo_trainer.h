// `lathe dpo`: the shared training loop (train/train_loop.h) with the DPO objective. Like `lathe sft`, the run
// folder holds recipe.yaml, metrics.jsonl (with TRL's rewards/* and logps/* keys) and checkpoints/step_N/
// (exact resume after SIGKILL, MPI data parallel); at the end <run>/model (a Hugging Face folder) or, for a
// LoRA run, <run>/adapter (a PEFT adapter folder).
#pragma once

#include <string>

#include "lathe/posttrain/dpo_options.h"
#include "lathe/train/train_loop.h"

namespace lathe::posttrain {

class DpoTrainer {
 public:
  // cfg: a resolved recipe with a dpo: section (dpo_options checks it now, before any run starts).
  explicit DpoTrainer(train::TrainConfig cfg, train::TrainerHooks hooks = {});

  const DpoOptions& options() const { return opts_; }
  const train::TrainConfig& config() const { return loop_.config(); }

  // Trains to schedule.steps; after a finished run (not stopped early) rank 0 exports the last checkpoint
  // to output_dir(). The run folder stays locked while the trainer lives.
  train::TrainResult run(train::StartMode mode);
  static void request_stop() { train::TrainLoop::request_stop(); }
  std::string output_dir() const;  // <run>/model, or <run>/adapter for a LoRA run

 private:
  DpoOptions opts_;
  train::TrainLoop loop_;
};

}  // namespace lathe::posttrain
