#include "lathe/posttrain/dpo_trainer.h"

#include "lathe/posttrain/dpo_objective.h"
#include "lathe/posttrain/posttrain_run.h"

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
  return run_and_export(loop_, mode, [this](int world) { return std::make_unique<DpoObjective>(opts_, world); });
}

std::string DpoTrainer::output_dir() const { return posttrain::output_dir(loop_.config()); }

}  // namespace lathe::posttrain
