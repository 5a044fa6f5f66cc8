// What every post-training command (`lathe sft`, `dpo`, `distill`) does around its objective: run the shared
// training loop with the objective in the run's Context, then export the last checkpoint of a finished run
// as <run>/model (a Hugging Face folder) or, for a LoRA run, <run>/adapter (a PEFT adapter folder).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lathe/train/objective.h"
#include "lathe/train/train_loop.h"

namespace lathe::posttrain {

// <run>/model, or <run>/adapter for a recipe with a lora: section.
std::string output_dir(const train::TrainConfig& cfg);

// Runs `loop` with the objective make_objective(world size) builds inside the run's Context (its data and
// reference or teacher models live there); after a finished run (not stopped early) rank 0 exports the last
// checkpoint to output_dir(loop.config()).
using MakeObjective = std::function<std::unique_ptr<train::Objective>(int world)>;
train::TrainResult run_and_export(train::TrainLoop& loop, train::StartMode mode, const MakeObjective& make_objective);

// Writes `out` (replaced) as a Hugging Face folder from checkpoint `ckpt`: every file but the training
// state (optimizer.safetensors, state.json, DONE), copied to a temporary folder and renamed into place.
void export_hf_folder(const std::string& ckpt, const std::string& out);

}  // namespace lathe::posttrain
