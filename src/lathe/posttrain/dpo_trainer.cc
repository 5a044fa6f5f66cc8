#include "lathe/posttrain/dpo_trainer.h"

#include <filesystem>

#include "lathe/base/context.h"
#include "lathe/dist/communicator.h"
#include "lathe/posttrain/dpo_objective.h"
#include "lathe/posttrain/sft_trainer.h"

namespace lathe::posttrain {

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, DpoOptions& opts) {
  opts = dpo_options(cfg);  // also writes the dpo defaults into cfg.resolved
  return cfg;
}

}  // namespace

DpoTrainer::DpoTrainer(train::TrainConfig cfg, train::TrainerHooks hooks)
    : loop_(with_defaults(std::move(cfg), opts_), std::move(hooks)) {}

train::TrainResult DpoTrainer::run(train::StartMode mode) {
  dist::Communicator& comm = dist::world();
  Context ctx(train::train_thread_count(loop_.config().threads, comm));  // first: outlives what it runs
  ContextScope scope(ctx);
  DpoObjective objective(opts_, comm.size());
  train::TrainResult r = loop_.run(objective, mode, ctx);
  if (!r.stopped_early && comm.rank() == 0 && !r.last_checkpoint.empty())
    export_hf_folder(r.last_checkpoint, output_dir());
  return r;
}

std::string DpoTrainer::output_dir() const {
  return (std::filesystem::path(loop_.config().run_dir) / (loop_.config().lora.is_null() ? "model" : "adapter")).string();
}

}  // namespace lathe::posttrain
