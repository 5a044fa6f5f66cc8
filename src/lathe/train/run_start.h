// The start of a training run, before its first step: the run folder (locked, never silently reused), the
// checkpoint a resume continues from, and the model (from that checkpoint, a base folder or scratch).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "lathe/dist/communicator.h"
#include "lathe/models/model.h"
#include "lathe/train/recipe.h"
#include "lathe/train/run_folder.h"

namespace lathe::train {

// How a run treats the run folder.
enum class StartMode : uint8_t {
  kFresh,      // refuse a folder that holds an earlier run (checkpoints or metrics)
  kResume,     // continue from the newest intact checkpoint (step 0 when the folder has none)
  kOverwrite,  // delete the earlier run's files first (train/run_folder.h remove_earlier_run)
};

using Note = std::function<void(const std::string&)>;

// Rank 0 creates and locks cfg.run_dir (into `lock`, replacing an earlier lock of this process) and
// applies `mode` to what an earlier run left; every rank learns whether that failed (on_lead).
void prepare_run_folder(const TrainConfig& cfg, StartMode mode, dist::Communicator& comm,
                        std::unique_ptr<RunLock>& lock, const Note& note);

// kResume: the newest intact checkpoint (nullopt when the folder has none), telling `note` which newer ones
// were skipped; throws IoError when every one is damaged. Other modes: nullopt.
std::optional<std::string> resume_checkpoint(const std::string& run_dir, StartMode mode, const Note& note);

// The model to train, f32 and writable: from `checkpoint`, else model.base, else model.config with fresh
// weights from run.seed.
std::unique_ptr<Model> open_model(const TrainConfig& cfg, const std::optional<std::string>& checkpoint);

// Hash of the recipe keys that define the trajectory (not its length, logging, checkpoint cadence or memory
// plan), so a resume with, e.g., more steps is accepted and one with another learning rate or precision is
// flagged.
std::string trajectory_hash(nlohmann::json recipe);

}  // namespace lathe::train
