// The training loop, the same for every objective (train/objective.h):
//   per step:  for each of grad_accum micro-batches: {loss, tokens, metrics} = objective's next micro-batch
//                                                     backward(loss / grad_accum)
//              gradients averaged over the ranks (all-reduce, overlapped with the last backward or not)
//              g_norm = ||g||;  clip = min(1, grad_clip / g_norm);  AdamW(lr(step), clip) (ZeRO-1: on
//              this rank's range, then all-gathered);  zero grads
//              metrics, progress, eval every eval.every steps, checkpoint every checkpoint.every steps
// Metrics go to <run>/metrics.jsonl (one JSON object per line: train steps and evals); the resolved
// recipe to <run>/recipe.yaml. The run folder belongs to one run (train/run_folder.h): it is locked while
// the loop lives, and a fresh start refuses a folder that holds an earlier run. A run resumed from a
// checkpoint reproduces the uninterrupted run's losses bit for bit (same thread count): every piece of
// state (weights, moments, step, the objective's data position) is in the checkpoint and every kernel is
// deterministic for a given thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lathe/base/context.h"
#include "lathe/train/objective.h"
#include "lathe/train/recipe.h"
#include "lathe/train/run_folder.h"
#include "lathe/train/run_start.h"

namespace lathe::train {

struct StepReport {
  int64_t step = 0, steps = 0;  // step just completed (1-based), total
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, mfu = 0;  // MFU: model FLOPs / measured fp32 FMA peak of this machine
  double elapsed_s = 0;
  ObjectiveMetrics metrics;  // the objective's, averaged over the step's micro-batches and ranks
  uint64_t weight_version = 0;  // Model::weight_version() after the step: one bump per optimizer step of this process
};

struct EvalReport {
  int64_t step = 0;
  double val_loss = 0;
  ObjectiveMetrics metrics;  // the objective's eval metrics
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

// Threads for this rank: `requested` (run.threads), or for 0 all cores, shared between the ranks that run
// on this machine.
int train_thread_count(int requested, const dist::Communicator& comm);

class TrainLoop {
 public:
  // cfg: the resolved recipe; the loop reads run.*, model.*, data.grad_accum, optimizer.*, schedule.*,
  // eval.every and checkpoint.* (the objective reads its own section).
  explicit TrainLoop(TrainConfig cfg, TrainerHooks hooks = {});
  ~TrainLoop();

  const TrainConfig& config() const { return cfg_; }

  // Trains the model with `objective` to cfg.steps, in `ctx` (its thread pool; the caller's ContextScope).
  // The run folder stays locked (RunLock) until the loop is destroyed, so a caller can draw the loss curve
  // and sample from the last checkpoint before another run may start. kResume skips damaged checkpoints
  // (saying which and why) and throws IoError when every one is. A failed metrics write stops training
  // after a last checkpoint and throws IoError naming the file.
  TrainResult run(Objective& objective, StartMode mode, Context& ctx);

  // Asks the running loop to stop after the current step and write a checkpoint (async-signal-safe).
  static void request_stop();

 private:
  TrainConfig cfg_;
  TrainerHooks hooks_;
  std::unique_ptr<RunLock> lock_;  // rank 0: held from run() until destruction
};

}  // namespace lathe::train
