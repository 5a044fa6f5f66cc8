#include "lathe/posttrain/sft_trainer.h"

#include "lathe/posttrain/sft_objective.h"
#include "lathe/posttrain/posttrain_run.h"

namespace lathe::posttrain {

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, SftOptions& opts) {
  opts = sft_options(cfg);  // also writes the sft defaults into cfg.resolved
  return cfg;
}

}  // namespace

SftTrainer::SftTrainer(train::TrainConfig cfg, train::TrainerHooks hooks)
    : loop_(with_defaults(std::move(cfg), opts_), std::move(hooks)) {}

train::TrainResult SftTrainer::run(train::StartMode mode) {
  return run_and_export(loop_, mode, [this](int world) { return std::make_unique<SftObjective>(opts_, world); });
}

std::string SftTrainer::output_dir() const { return posttrain::output_dir(loop_.config()); }

}  // namespace lathe::posttrain
