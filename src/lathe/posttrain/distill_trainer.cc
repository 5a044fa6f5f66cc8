#include "lathe/posttrain/distill_trainer.h"

#include "lathe/posttrain/distill_objective.h"
#include "lathe/posttrain/posttrain_run.h"

namespace lathe::posttrain {

namespace {

train::TrainConfig with_defaults(train::TrainConfig cfg, DistillOptions& opts) {
  opts = distill_options(cfg);  // also writes the distill (and sft data) defaults into cfg.resolved
  return cfg;
}

}  // namespace

DistillTrainer::DistillTrainer(train::TrainConfig cfg, train::TrainerHooks hooks, MakeCompletionSampler make_sampler)
    : make_sampler_(std::move(make_sampler)), loop_(with_defaults(std::move(cfg), opts_), std::move(hooks)) {}

train::TrainResult DistillTrainer::run(train::StartMode mode) {
  return run_and_export(loop_, mode, [this](int world) {
    std::unique_ptr<CompletionSampler> sampler = opts_.samples() && make_sampler_ ? make_sampler_() : nullptr;
    return std::make_unique<DistillObjective>(opts_, world, std::move(sampler));
  });
}

std::string DistillTrainer::output_dir() const { return posttrain::output_dir(loop_.config()); }

}  // namespace lathe::posttrain
