// Training recipes: YAML files (DESIGN.md "configuration is data") with key=value overrides, resolved
// into one typed TrainConfig. Every key is checked: an unknown key or a value of the wrong type is an
// error naming the key (a typo must not silently train with a default). The resolved recipe is saved
// with every run (TrainConfig::resolved). Format reference: docs/recipes.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/train/adamw.h"
#include "lathe/train/lr_schedule.h"

namespace lathe {
struct ModelConfig;
}

namespace lathe::train {

struct TrainConfig {
  // run
  std::string run_dir = "runs/run";
  uint64_t seed = 0;  // initial weights and data order
  int threads = 0;    // 0: all cores (or LATHE_NUM_THREADS)
  int64_t log_every = 1;
  bool recompute_layers = false;  // keep only layer inputs; recompute each layer in the backward pass
  // "f32", or "bf16": bf16 matmul inputs and weight copies, f32 master weights, moments and statistics
  // (specs/pretrain.md §2.4). Always written to the resolved recipe.
  std::string precision = "f32";
  std::string overlap_allreduce = "auto";  // auto | on | off: bucketed all-reduce during the backward
  double allreduce_bucket_mb = 25;         // bucket size of the overlapped all-reduce (MiB of f32 gradients)
  int zero = 0;                            // 1: ZeRO-1, the optimizer state split over the ranks
  // Seconds a collective may wait for the other ranks before the run ends naming the silent ones (a rank
  // stopped, hung or cut off); 0: wait forever. Above the longest pause between collectives (checkpoints).
  double collective_timeout = 600;

  // model: exactly one of base (a Hugging Face folder to continue from) or config (config.json inline)
  std::string model_base;
  nlohmann::json model_config;
  // model.quantize: the frozen base's decoder Linears quantised at load in this format ("nf4": QLoRA;
  // any `lathe quantize` format); "" keeps them f32. Needs a lora: section.
  std::string model_quantize;

  // data
  std::string train_data, val_data;  // shard folders or name prefixes (lathe data prepare --out/--name)
  int64_t seq_len = 0;               // T
  int64_t batch_size = 0;            // sequences per micro-batch, summed over ranks
  int64_t grad_accum = 1;            // micro-batches per optimizer step
  bool shuffle = true;
  bool document_masking = false;  // attention stays inside each document; positions restart per document
  int32_t delimiter_id = -1;      // the token opening each document (-1: from the data manifest)

  // optimizer and schedule (schedule.total_steps = steps)
  AdamWConfig adamw;
  double grad_clip = 1.0;            // global-norm clip (0: off)
  bool decay_embeddings = false;     // weight decay on embeddings (norms and biases never decay)
  int64_t steps = 0;
  LrSchedule schedule;

  // evaluation
  int64_t eval_every = 0;     // 0: only at the end
  int64_t eval_batches = 8;   // validation batches of batch_size sequences, always the same ones
  double target_val_loss = 0; // > 0: the run reports whether the final val loss reached it

  // checkpoints
  int64_t checkpoint_every = 0;  // 0: only at the end
  int keep_checkpoints = 3;
  bool save_initial = false;     // also write step_00000000 (the initial weights) before training

  // memory plan (train/memory_plan.h), made once the models are loaded, before step 1
  int64_t memory_budget = 0;           // bytes per rank (memory.budget: "20GiB"); 0: MemAvailable at the start
  std::string memory_check = "error";  // error: stop when the plan exceeds the budget | warn | off (no plan)

  // post-training sections, checked by their objectives (posttrain/sft_options.h): null when absent. An
  // `sft:` section makes this an SFT recipe (`lathe sft`): data.train is then JSON Lines and data.seq_len
  // is replaced by sft.max_length. A `dpo:` section makes it a preference recipe (`lathe dpo`,
  // posttrain/dpo_options.h), with the same data rules. `lora:` trains LoRA adapters only.
  // `distill:` makes it a distillation recipe (`lathe distill`, posttrain/distill_options.h): the data as SFT
  // (the sft: section's data keys apply; sft: may be left out). `grpo:` makes it an RL recipe (the GRPO
  // family, posttrain/grpo_options.h): data.batch_size counts completions, data.seq_len is not used.
  nlohmann::json sft;
  nlohmann::json lora;
  nlohmann::json dpo;
  nlohmann::json distill;
  nlohmann::json grpo;

  // samples printed at the end (needs the tokenizer named by the data manifest)
  std::vector<std::string> sample_prompts;
  int64_t sample_tokens = 32;

  nlohmann::json resolved;  // the whole recipe after overrides, as saved in the run folder
  std::string recipe_path;  // where the recipe came from (error messages)
};

// Checks every key of a resolved recipe (ranges, positivity, choices); throws InvalidArgument naming the
// recipe, the key and its value. load_recipe / parse_recipe call it.
void validate_recipe(const TrainConfig& c);
// The checks that need the model's config (data.seq_len and samples.max_tokens against its context); the
// trainer calls it once the model is known, before the first step.
void validate_recipe_for_model(const TrainConfig& c, const ModelConfig& m);

// Reads a recipe file (keys checked as validate_recipe says) and applies overrides ("optimizer.lr=1e-3", "model.config.num_hidden_layers=4").
// A recipe may name a parent with `base_recipe: other.yaml` (relative to itself); its keys are defaults.
TrainConfig load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from YAML text (tests).
TrainConfig parse_recipe(const std::string& yaml_text, const std::vector<std::string>& overrides = {},
                         const std::string& where = "recipe");

// YAML text -> JSON value (scalars typed as YAML 1.2 core: int, float, bool, null, else string). Only the
// first document; aliases, repeated keys and non-string keys are FormatErrors naming the line (recipe_yaml.cc).
nlohmann::json yaml_to_json(const std::string& yaml_text, const std::string& where);
// Why `key` cannot be a recipe key ("" when it can): longer than kMaxRecipeKeyBytes (YAML allows at most
// 1024 characters in a plain key, so a longer one would not survive the saved recipe.yaml) or holding a
// control character.
inline constexpr size_t kMaxRecipeKeyBytes = 256;
std::string recipe_key_problem(const std::string& key);
std::string json_to_yaml(const nlohmann::json& j);

}  // namespace lathe::train
