#include "lathe/train/trainer.h"

#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/train/pretrain_objective.h"

namespace lathe::train {

Trainer::Trainer(TrainConfig cfg, TrainerHooks hooks) : loop_(std::move(cfg), std::move(hooks)) {}

TrainResult Trainer::run(StartMode mode) {
  // Data parallelism: under mpirun every rank runs the loop on its share of each global batch; the
  // gradients are averaged across ranks before the (replicated, identical) optimizer step.
  dist::Communicator& comm = dist::world();
  const TrainConfig& cfg = loop_.config();
  Context ctx(train_thread_count(cfg.threads, comm));  // declared first: everything below is freed while it lives
  ContextScope scope(ctx);
  PretrainObjective objective(pretrain_options(cfg), comm.size());
  return loop_.run(objective, mode, ctx);
}

}  // namespace lathe::train
