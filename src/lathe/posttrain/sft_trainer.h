// `lathe sft`: the shared training loop (train/train_loop.h) with the SFT objective, and the Hugging Face
// folder of the result. Like pre-training, the run folder holds recipe.yaml, metrics.jsonl and
// checkpoints/step_N/ (exact resume after SIGKILL, MPI data parallel); at the end, <run>/model/ holds the
// final weights as a plain Hugging Face folder (config, safetensors, generation config, tokenizer files).
#pragma once

#include <string>

#include "lathe/posttrain/sft_options.h"
#include "lathe/train/train_loop.h"

namespace lathe::posttrain {

class SftTrainer {
 public:
  // cfg: a resolved recipe with an sft: section (sft_options checks it now, before any run starts).
  explicit SftTrainer(train::TrainConfig cfg, train::TrainerHooks hooks = {});

  const SftOptions& options() const { return opts_; }
  const train::TrainConfig& config() const { return loop_.config(); }

  // Trains to schedule.steps; after a finished run (not stopped early) rank 0 exports the last checkpoint
  // to output_dir(). The run folder stays locked while the trainer lives.
  train::TrainResult run(train::StartMode mode);
  static void request_stop() { train::TrainLoop::request_stop(); }
  // <run>/model (a Hugging Face folder), or <run>/adapter for a LoRA run (a PEFT adapter folder with the
  // tokenizer files; `lathe generate BASE --adapter DIR` runs it, `lathe merge` folds it into the base).
  std::string output_dir() const;

 private:
  SftOptions opts_;
  train::TrainLoop loop_;
};

}  // namespace lathe::posttrain
