// Pre-training: the training loop (train/train_loop.h) with the pre-training objective
// (train/pretrain_objective.h), as `lathe pretrain` runs it.
//   per step:  for each micro-batch: loss = CE(model(inputs), targets); backward(loss / accum)
//              g_norm = ||g||;  clip = min(1, grad_clip / g_norm);  AdamW(lr(step), clip);  zero grads
// Metrics, checkpoints, exact resume and the run folder are the loop's (see there).
#pragma once

#include <cstdint>

#include "lathe/models/config.h"
#include "lathe/train/recipe.h"
#include "lathe/train/train_loop.h"

namespace lathe::train {

class Trainer {
 public:
  explicit Trainer(TrainConfig cfg, TrainerHooks hooks = {});

  // Trains to cfg.steps (TrainLoop::run): the run folder stays locked until the trainer is destroyed.
  TrainResult run(StartMode mode);

  // Asks the loop to stop after the current step and write a checkpoint (async-signal-safe).
  static void request_stop() { TrainLoop::request_stop(); }

 private:
  TrainLoop loop_;
};

}  // namespace lathe::train
