// LoRA configuration in PEFT's terms (peft LoraConfig, specs/posttrain.md §3.2): rank, alpha, rsLoRA,
// dropout and which modules to adapt, read from and written to adapter_config.json (and, with the same
// keys, a recipe's `lora:` section).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe {

struct LoraConfig {
  int r = 8;                // rank R
  double lora_alpha = 8;    // scaling = alpha / R (alpha / sqrt(R) with use_rslora)
  bool use_rslora = false;  // rsLoRA (arXiv 2312.03732)
  double lora_dropout = 0;  // on each adapter's input in training forwards, in [0, 1)
  // Which modules (Hugging Face module paths, e.g. "model.layers.0.self_attn.q_proj") get an adapter, as
  // PEFT decides it: target_modules names match a path equal to one or ending in "." + one; a nonempty
  // target_regex must match the whole path instead (PEFT's string form, re.fullmatch), and the string
  // "all-linear" takes every Linear of the decoder layers. Both empty: the family's PEFT default
  // (default_lora_targets).
  std::vector<std::string> target_modules;
  std::string target_regex;
  std::vector<std::string> exclude_modules;  // the same two forms, for modules to leave out
  std::string exclude_regex;
  std::vector<int> layers_to_transform;  // decoder layers to adapt; empty: all
  std::string base_model_name_or_path;   // written to adapter_config.json
  // As read; written true when an adapted module is a Conv1D (GPT-2), as PEFT sets it for those.
  bool fan_in_fan_out = false;

  float scaling() const;
};

// Reads adapter_config.json's keys (PEFT: `peft_type` "LORA", target_modules as a list or a regex
// string, layers_to_transform as an int or a list, ...). `where` names the source in errors. Throws
// NotImplemented for what lathe does not train or apply (peft_type other than LORA, use_dora, lora_bias,
// bias other than "none", modules_to_save, rank_pattern / alpha_pattern, layer_replication,
// trainable_token_indices) and InvalidArgument for bad values. A PEFT file's other keys (bookkeeping)
// are ignored; with strict_keys (a recipe) an unknown key is an error.
LoraConfig lora_config_from_json(const nlohmann::json& j, const std::string& where, bool strict_keys = false);

// adapter_config.json as PEFT writes it: every key of its LoraConfig (sorted), r, lora_alpha, use_rslora,
// lora_dropout, target_modules, base_model_name_or_path, fan_in_fan_out, peft_type "LORA", task_type
// "CAUSAL_LM", bias "none" always present.
nlohmann::json lora_config_to_json(const LoraConfig& c);

}  // namespace lathe
