// Training checkpoints (specs/pretrain.md §2.9): one folder per step under <run>/checkpoints/,
//   step_00000100/
//     config.json, model.safetensors   the weights as a Hugging Face folder (f32 master weights), loadable
//                                      by `lathe generate` / `lathe verify` and by transformers
//     optimizer.safetensors            AdamW moments: exp_avg.<param>, exp_avg_sq.<param>
//     state.json                       step, data cursor, seed, optimizer step count, recipe hash, world size
//     DONE                             written last: a folder without it is incomplete and ignored
// The folder is written under a temporary name, every file fsynced, then renamed into place and the
// parent fsynced: a crash (even SIGKILL mid-write) leaves the previous checkpoints intact. Only the
// newest `keep` complete checkpoints are kept (plus step 0, the initial weights, when it was saved).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "lathe/models/model.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

struct TrainState {
  int64_t step = 0;         // optimizer steps completed
  int64_t data_cursor = 0;  // global samples consumed by the train loader
  uint64_t seed = 0;
  int world_size = 1;
  std::string recipe_hash;  // of the resolved recipe minus run-length keys: a resume with another recipe warns
};

// Writes <run_dir>/checkpoints/step_<step>/ and prunes older ones beyond `keep`. Returns its path.
std::string save_checkpoint(const std::string& run_dir, const Model& model, const AdamW& opt, const TrainState& st,
                            int keep);

// The newest complete checkpoint folder of a run (DONE present and state.json readable), if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// Restores the optimizer moments (of the elements `opt` owns: all, or a ZeRO-1 rank's range) and the
// state; the weights are loaded by Model::load(dir, writable).
TrainState load_checkpoint_state(const std::string& dir, AdamW& opt);

}  // namespace lathe::train
