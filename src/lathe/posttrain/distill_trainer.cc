#include "lathe/posttrain/distill_trainer.h"

#include <filesystem>

#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/posttrain/distill_objective.h"
#include "lathe/posttrain/sft_trainer.h"

namespace lathe::posttrain {

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, DistillOptions& opts) {
  opts = distill_options(cfg);  // also writes the distill (and sft data) defaults into cfg.resolved
  return cfg;
}

}  // namespace

DistillTrainer::DistillTrainer(train::TrainConfig cfg, train::TrainerHooks hooks)
    : loop_(with_defaults(std::move(cfg), opts_), std::move(hooks)) {}

train::TrainResult DistillTrainer::run(train::StartMode mode) {
  dist::Communicator& comm = dist::world();
  Context ctx(train::train_thread_count(loop_.config().threads, comm));  // first: outlives what it runs
  ContextScope scope(ctx);
  DistillObjective objective(opts_, comm.size());
  train::TrainResult r = loop_.run(objective, mode, ctx);
  if (!r.stopped_early && comm.rank() == 0 && !r.last_checkpoint.empty())
    export_hf_folder(r.last_checkpoint, output_dir());
  return r;
}

std::string DistillTrainer::output_dir() const {
  return (std::filesystem::path(loop_.config().run_dir) / (loop_.config().lora.is_null() ? "model" : "adapter"))
      .string();
}

}  // namespace lathe::posttrain
