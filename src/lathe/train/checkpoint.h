// Training checkpoints (specs/pretrain.md §2.9): one folder per step under <run>/checkpoints/,
//   step_00000100/
//     config.json, model.safetensors   the weights as a Hugging Face folder (f32 master weights), loadable
//     generation_config.json           by `lathe generate` / `lathe verify` and by transformers, with the
//     tokenizer.json, ...              tokenizer the data was prepared with (tokenizer_config.json and
//                                      special_tokens_map.json too, when present)
//     optimizer.safetensors            AdamW moments: exp_avg.<param>, exp_avg_sq.<param>
//     state.json                       step, data cursor, seed, optimizer step count, recipe hash, world
//                                      size, run id, and the size and XXH3-128 digest of every other file
//     DONE                             written last, holds state.json's digest: a folder without it is
//                                      incomplete
// The folder is written under a temporary name, every file fsynced, then renamed into place and the
// parent fsynced: a crash (even SIGKILL mid-write) leaves the previous checkpoints intact. Only the
// newest `keep` checkpoints of the current run (its run id) are kept, plus step 0, the initial weights,
// when it was saved; checkpoints of other runs are never deleted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

struct TrainState {
  int64_t step = 0;         // optimizer steps completed
  int64_t data_cursor = 0;  // global samples consumed by the train loader
  uint64_t seed = 0;
  int world_size = 1;
  std::string recipe_hash;  // of the resolved recipe minus run-length keys: a resume with another recipe warns
  std::string run_id;       // random at a fresh start, kept by --resume ("" in checkpoints of older lathe)
};

struct SaveCheckpointOptions {
  // Files written beside the weights (name -> bytes), unless the model writes one of that name itself:
  // the tokenizer and generation_config.json (checkpoint_companion_files), read once per run so every
  // checkpoint carries the same tokenizer even if its source is edited or moved during the run.
  std::vector<std::pair<std::string, std::string>> companion_files;
  // A LoRA run: the adapter as a PEFT folder's files (adapter_config.json + adapter_model.safetensors)
  // instead of the model's weights and config.json; the frozen base is not written (resume: load the base,
  // then LoraAdapters::load(model, checkpoint)). Must outlive the call.
  const LoraAdapters* lora = nullptr;
};

// Writes <run_dir>/checkpoints/step_<step>/ (crash-safe, see above). Returns its path.
std::string save_checkpoint(const std::string& run_dir, const Model& model, const AdamW& opt, const TrainState& st,
                            const SaveCheckpointOptions& opts);

// The checkpoint folders (step_*, complete or not) under `ckpt_root` (RUN/checkpoints), oldest first.
std::vector<std::filesystem::path> checkpoint_folders(const std::filesystem::path& ckpt_root);

// Deletes this run's checkpoints (by st.run_id) older than the newest `keep`, up to st.step; step 0 (the
// initial weights) and other runs' checkpoints (another run id, or none) are never touched. Also removes
// stale temporaries of interrupted writes. Throws std::filesystem::filesystem_error when a removal fails.
void prune_checkpoints(const std::string& run_dir, const TrainState& st, int keep);

// The result of checking one checkpoint folder against the digests it records.
struct CheckpointCheck {
  struct File {
    std::string name;
    bool ok = false;
    std::string detail;  // why it failed ("missing", "size 10, recorded 20 (truncated)", ...) or a note
  };
  std::string dir;
  std::vector<File> files;
  std::string problem;  // the first failure in a few words ("" when intact)
  bool ok() const { return problem.empty(); }
};

// Checks DONE, state.json (against the digest in DONE) and every file state.json lists (size and XXH3),
// and that the weights, optimizer state and config are there (a LoRA checkpoint: the adapter's two files
// in place of config.json and model.safetensors). A checkpoint of an older lathe (no digests)
// has its safetensors headers and sizes checked instead. Never throws for a damaged folder.
CheckpointCheck verify_checkpoint(const std::string& dir);

// The newest intact checkpoint of a run, and the newer ones skipped, each "<dir>: <why>".
struct ResumePoint {
  std::optional<std::string> dir;
  std::vector<std::string> skipped;
};
ResumePoint find_resume_checkpoint(const std::string& run_dir);

// find_resume_checkpoint(run_dir).dir.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

// Restores the optimizer moments (of the elements `opt` owns: all, or a ZeRO-1 rank's range) and the
// state; the weights are loaded by Model::load(dir, {.force_f32 = true}).
TrainState load_checkpoint_state(const std::string& dir, AdamW& opt);

// The files that make a checkpoint a complete Hugging Face folder, read now: tokenizer.json (from
// `tokenizer`, a tokenizer.json of any name or its folder; "": none), tokenizer_config.json and
// special_tokens_map.json when present beside it, and a generation_config.json with bos / eos / pad from
// the model's config, else from the tokenizer.
std::vector<std::pair<std::string, std::string>> checkpoint_companion_files(const ModelConfig& cfg,
                                                                             const std::string& tokenizer);

}  // namespace lathe::train
