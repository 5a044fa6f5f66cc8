// The pre-training loop: recipe -> model (from scratch or a base folder) -> data -> AdamW steps with
// gradient accumulation, global-norm clipping and an LR schedule -> eval, metrics and checkpoints.
//   per step:  for each micro-batch: loss = CE(model(inputs), targets); backward(loss / accum)
//              g_norm = ||g||;  clip = min(1, grad_clip / g_norm);  AdamW(lr(step), clip);  zero grads
// Metrics go to <run>/metrics.jsonl (one JSON object per line: train steps and evals); the resolved
// recipe to <run>/recipe.yaml. The run folder belongs to one run (train/run_folder.h): it is locked while
// the trainer lives, and a fresh start refuses a folder that holds an earlier run. A run resumed from a checkpoint reproduces the uninterrupted run's losses
// bit for bit (same thread count): every piece of state is in the checkpoint and every kernel is
// deterministic for a given thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lathe/models/config.h"
#include "lathe/train/recipe.h"
#include "lathe/train/run_folder.h"

namespace lathe::train {

struct StepReport {
  int64_t step = 0, steps = 0;  // step just completed (1-based), total
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, mfu = 0;  // MFU: model FLOPs / measured fp32 FMA peak of this machine
  double elapsed_s = 0;
  uint64_t weight_version = 0;  // Model::weight_version() after the step: one bump per optimizer step of this process
};

struct EvalReport {
  int64_t step = 0;
  double val_loss = 0;
};

struct TrainerHooks {
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalReport&)> on_eval;
  std::function<void(const std::string&)> on_message;  // checkpoint written, resumed from, ...
};

struct TrainResult {
  int64_t steps_done = 0;
  double final_loss = 0, final_val_loss = -1;  // -1: no validation data
  bool stopped_early = false;                  // by request_stop() (SIGTERM / SIGINT): checkpointed
  std::string last_checkpoint;
};

// How run() treats the run folder.
enum class StartMode : uint8_t {
  kFresh,      // refuse a folder that holds an earlier run (checkpoints or metrics)
  kResume,     // continue from the newest intact checkpoint (step 0 when the folder has none)
  kOverwrite,  // delete the earlier run's files first (train/run_folder.h remove_earlier_run)
};

class Trainer {
 public:
  explicit Trainer(TrainConfig cfg, TrainerHooks hooks = {});
  ~Trainer();

  // Trains to cfg.steps. The run folder stays locked (RunLock) until the trainer is destroyed, so a
  // caller can draw the loss curve and sample from the last checkpoint before another run may start.
  // kResume skips damaged checkpoints (saying which and why) and throws IoError when every one is.
  // A failed metrics write stops training after a last checkpoint and throws IoError naming the file.
  TrainResult run(StartMode mode);

  // Asks the loop to stop after the current step and write a checkpoint (async-signal-safe).
  static void request_stop();

  // FLOPs per trained token (specs/pretrain.md §3, causal): 6 N_matmul + 12 sum_layers d_attn k_mean.
  static double flops_per_token(const ModelConfig& cfg, int64_t n_matmul_params, int64_t seq_len);

 private:
  TrainConfig cfg_;
  TrainerHooks hooks_;
  std::unique_ptr<RunLock> lock_;  // rank 0: held from run() until destruction
  static std::atomic<bool> stop_requested_;
};

}  // namespace lathe::train
