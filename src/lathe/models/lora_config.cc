// LoraConfig <-> adapter_config.json (see lora_config.h).
#include "lathe/models/lora_config.h"

#include <cmath>
#include <set>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe {
using nlohmann::json;

namespace {

// Keys lathe reads; a PEFT file's others are bookkeeping (peft_version, auto_mapping, ...).
const std::set<std::string>& known_keys() {
  static const std::set<std::string> k{"peft_type",
                                       "task_type",
                                       "base_model_name_or_path",
                                       "revision",
                                       "inference_mode",
                                       "r",
                                       "lora_alpha",
                                       "use_rslora",
                                       "target_modules",
                                       "exclude_modules",
                                       "layers_to_transform",
                                       "layers_pattern",
                                       "lora_dropout",
                                       "bias",
                                       "fan_in_fan_out",
                                       "modules_to_save",
                                       "rank_pattern",
                                       "alpha_pattern",
                                       "init_lora_weights",
                                       "use_dora",
                                       "lora_bias",
                                       "layer_replication",
                                       "trainable_token_indices"};
  return k;
}

bool is_null_or_empty(const json& j, const char* key) {
  if (!j.contains(key)) return true;
  const json& v = j[key];
  return v.is_null() || ((v.is_array() || v.is_object()) && v.empty());
}

// A string (regex) or a list of strings (module names) into the config's two fields.
void read_module_set(const json& j, const char* key, const std::string& where, std::vector<std::string>& names,
                     std::string& regex) {
  if (!j.contains(key) || j[key].is_null()) return;
  const json& v = j[key];
  if (v.is_string()) {
    regex = v.get<std::string>();
    LATHE_CHECK_ARG(!regex.empty(), where, ": '", key, "' is an empty string");
    return;
  }
  LATHE_CHECK_ARG(v.is_array(), where, ": '", key, "' must be a list of module names or a regex string, got ",
                  json_for_message(v));
  for (const json& e : v) {
    LATHE_CHECK_ARG(e.is_string() && !e.get<std::string>().empty(), where, ": '", key,
                    "' entries must be nonempty strings, got ", json_for_message(e));
    names.push_back(e.get<std::string>());
  }
}

json number_json(double v) {  // PEFT writes integral alphas as ints
  if (std::floor(v) == v && std::fabs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

float LoraConfig::scaling() const {
  return static_cast<float>(use_rslora ? lora_alpha / std::sqrt(static_cast<double>(r)) : lora_alpha / r);
}

LoraConfig lora_config_from_json(const json& j, const std::string& where, bool strict_keys) {
  LATHE_CHECK_ARG(j.is_object(), where, ": a LoRA config must be an object, got ", json_for_message(j));
  if (strict_keys)
    for (const auto& [k, v] : j.items()) LATHE_CHECK_ARG(known_keys().count(k), where, ": unknown LoRA key '", k, "'");
  const auto bool_or = [&](const char* key, bool fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    LATHE_CHECK_ARG(j[key].is_boolean(), where, ": '", key, "' must be true or false, got ", json_for_message(j[key]));
    return j[key].get<bool>();
  };
  const auto number_or = [&](const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    LATHE_CHECK_ARG(j[key].is_number(), where, ": '", key, "' must be a number, got ", json_for_message(j[key]));
    return j[key].get<double>();
  };
  const auto string_or = [&](const char* key, const std::string& fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    LATHE_CHECK_ARG(j[key].is_string(), where, ": '", key, "' must be a string, got ", json_for_message(j[key]));
    return j[key].get<std::string>();
  };

  const std::string peft_type = string_or("peft_type", "LORA");
  if (peft_type != "LORA")
    throw NotImplemented(str_cat(where, ": peft_type '", peft_type, "' (only LORA is supported)"));
  const std::string task = string_or("task_type", "CAUSAL_LM");
  LATHE_CHECK_ARG(task == "CAUSAL_LM", where, ": task_type '", task,
                  "' (lathe adapts causal language models: CAUSAL_LM)");
  if (bool_or("use_dora", false)) throw NotImplemented(str_cat(where, ": use_dora (DoRA) is not supported"));
  if (bool_or("lora_bias", false))
    throw NotImplemented(str_cat(where, ": lora_bias (a bias on lora_B) is not supported"));
  const std::string bias = string_or("bias", "none");
  if (bias != "none")
    throw NotImplemented(
        str_cat(where, ": bias '", bias, "' (training the base's biases) is not supported; use \"none\""));
  for (const char* key :
       {"modules_to_save", "rank_pattern", "alpha_pattern", "layer_replication", "trainable_token_indices"})
    if (!is_null_or_empty(j, key))
      throw NotImplemented(str_cat(where, ": '", key, "' is not supported (got ", json_for_message(j[key]), ")"));

  LoraConfig c;
  const double r = number_or("r", c.r);
  LATHE_CHECK_ARG(r >= 1 && r <= 65536 && std::floor(r) == r, where, ": 'r' must be an integer in [1, 65536], got ", r);
  c.r = static_cast<int>(r);
  c.lora_alpha = number_or("lora_alpha", c.lora_alpha);
  LATHE_CHECK_ARG(std::isfinite(c.lora_alpha), where, ": 'lora_alpha' must be finite");
  c.use_rslora = bool_or("use_rslora", false);
  c.lora_dropout = number_or("lora_dropout", 0.0);
  LATHE_CHECK_ARG(c.lora_dropout >= 0 && c.lora_dropout < 1, where, ": 'lora_dropout' must be in [0, 1), got ",
                  c.lora_dropout);
  c.fan_in_fan_out = bool_or("fan_in_fan_out", false);
  c.base_model_name_or_path = string_or("base_model_name_or_path", "");
  read_module_set(j, "target_modules", where, c.target_modules, c.target_regex);
  read_module_set(j, "exclude_modules", where, c.exclude_modules, c.exclude_regex);
  if (j.contains("layers_to_transform") && !j["layers_to_transform"].is_null()) {
    const json& v = j["layers_to_transform"];
    const auto add_layer = [&](const json& e) {
      LATHE_CHECK_ARG(e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() < (1 << 20), where,
                      ": 'layers_to_transform' entries must be layer indices >= 0, got ", json_for_message(e));
      c.layers_to_transform.push_back(e.get<int>());
    };
    if (v.is_array()) {
      for (const json& e : v) add_layer(e);
    } else {
      add_layer(v);
    }
  }
  return c;
}

json lora_config_to_json(const LoraConfig& c) {
  json j;  // nlohmann::json sorts its keys, as PEFT's json.dumps(sort_keys=True) does
  j["alpha_pattern"] = json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = c.base_model_name_or_path;
  j["bias"] = "none";
  j["exclude_modules"] = !c.exclude_regex.empty()    ? json(c.exclude_regex)
                         : c.exclude_modules.empty() ? json(nullptr)
                                                     : json(c.exclude_modules);
  j["fan_in_fan_out"] = c.fan_in_fan_out;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layer_replication"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = c.layers_to_transform.empty() ? json(nullptr) : json(c.layers_to_transform);
  j["loftq_config"] = json::object();
  j["lora_alpha"] = number_json(c.lora_alpha);
  j["lora_bias"] = false;
  j["lora_dropout"] = c.lora_dropout;
  j["megatron_config"] = nullptr;
  j["megatron_core"] = "megatron.core";
  j["modules_to_save"] = nullptr;
  j["peft_type"] = "LORA";
  j["r"] = c.r;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  j["target_modules"] = !c.target_regex.empty() ? json(c.target_regex) : json(c.target_modules);
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = false;
  j["use_rslora"] = c.use_rslora;
  return j;
}

}  // namespace lathe
