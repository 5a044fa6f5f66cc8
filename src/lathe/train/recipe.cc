#include "lathe/train/recipe.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "lathe/base/error.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json scalar_to_json(const YAML::Node& n) {
  const std::string s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  static const std::regex int_re(R"([-+]?[0-9]+)");
  static const std::regex float_re(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s == "null" || s == "~" || s.empty()) return nullptr;
  if (std::regex_match(s, int_re)) return std::stoll(s);
  if (std::regex_match(s, float_re)) return std::stod(s);
  return s;
}

json node_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : n) out.push_back(node_to_json(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) out[kv.first.as<std::string>()] = node_to_json(kv.second);
      return out;
    }
    default:
      return nullptr;
  }
}

void emit(YAML::Emitter& e, const json& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (auto it = j.begin(); it != j.end(); ++it) {
      e << YAML::Key << it.key() << YAML::Value;
      emit(e, it.value());
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& v : j) emit(e, v);
    e << YAML::EndSeq;
  } else if (j.is_string()) {
    e << YAML::DoubleQuoted << j.get<std::string>();
  } else if (j.is_null()) {
    e << YAML::Null;
  } else {
    e << j.dump();  // numbers and booleans exactly as JSON writes them (round-trips doubles)
  }
}

// Recursively merges `over` into `base` (objects merge key by key; anything else replaces).
void merge(json& base, const json& over) {
  if (!base.is_object() || !over.is_object()) {
    base = over;
    return;
  }
  for (auto it = over.begin(); it != over.end(); ++it) merge(base[it.key()], it.value());
}

json read_recipe_tree(const std::string& path, int depth) {
  LATHE_CHECK_ARG(depth < 8, path, ": base_recipe chain deeper than 8 (a cycle?)");
  std::ifstream in(path);
  LATHE_CHECK_ARG(in.good(), path, ": cannot read recipe");
  std::stringstream ss;
  ss << in.rdbuf();
  json tree = yaml_to_json(ss.str(), path);
  LATHE_CHECK_ARG(tree.is_object(), path, ": a recipe is a YAML mapping");
  if (tree.contains("base_recipe")) {
    LATHE_CHECK_ARG(tree["base_recipe"].is_string(), path, ": base_recipe must be a file name");
    const fs::path parent = fs::path(path).parent_path() / tree["base_recipe"].get<std::string>();
    json base = read_recipe_tree(parent.string(), depth + 1);
    tree.erase("base_recipe");
    merge(base, tree);
    return base;
  }
  return tree;
}

// Typed access that consumes keys, so leftovers can be reported as unknown.
class Reader {
 public:
  Reader(json& tree, std::string where) : tree_(tree), where_(std::move(where)) {}

  template <class T>
  void get(const std::string& dotted, T& out) {
    json* node = find(dotted);
    if (!node) return;
    try {
      if constexpr (std::is_same_v<T, bool>) {
        LATHE_CHECK_ARG(node->is_boolean(), "expected true or false");
      } else if constexpr (std::is_integral_v<T>) {
        LATHE_CHECK_ARG(node->is_number_integer(), "expected an integer");
      } else if constexpr (std::is_floating_point_v<T>) {
        LATHE_CHECK_ARG(node->is_number(), "expected a number");
      } else if constexpr (std::is_same_v<T, std::string>) {
        LATHE_CHECK_ARG(node->is_string(), "expected a string");
      }
      out = node->get<T>();
    } catch (const std::exception& e) {
      throw InvalidArgument(str_cat(where_, ": ", dotted, " = ", node->dump(), ": ", e.what()));
    }
    erase(dotted);
  }
  void get_json(const std::string& dotted, json& out) {
    if (json* node = find(dotted)) {
      out = *node;
      erase(dotted);
    }
  }
  void reject_leftovers() {
    std::vector<std::string> left;
    collect("", tree_, left);
    if (!left.empty()) {
      std::string list;
      for (const auto& k : left) list += (list.empty() ? "" : ", ") + k;
      throw InvalidArgument(str_cat(where_, ": unknown key(s): ", list, " (docs/recipes.md lists every key)"));
    }
  }

 private:
  json* find(const std::string& dotted) {
    json* node = &tree_;
    size_t start = 0;
    while (true) {
      const size_t dot = dotted.find('.', start);
      const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      if (!node->is_object() || !node->contains(key)) return nullptr;
      node = &(*node)[key];
      if (dot == std::string::npos) return node->is_null() ? nullptr : node;
      start = dot + 1;
    }
  }
  void erase(const std::string& dotted) {
    const size_t dot = dotted.rfind('.');
    json* parent = dot == std::string::npos ? &tree_ : find(dotted.substr(0, dot));
    parent->erase(dot == std::string::npos ? dotted : dotted.substr(dot + 1));
  }
  static void collect(const std::string& prefix, const json& node, std::vector<std::string>& out) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (it.value().is_object() && !it.value().empty()) collect(key, it.value(), out);
      else if (!it.value().is_object() && !it.value().is_null()) out.push_back(key);
    }
  }
  json& tree_;
  std::string where_;
};

TrainConfig from_tree(json tree, const std::string& where) {
  TrainConfig c;
  c.resolved = tree;
  Reader r(tree, where);
  r.get("run.dir", c.run_dir);
  r.get("run.seed", c.seed);
  r.get("run.threads", c.threads);
  r.get("run.log_every", c.log_every);
  r.get("run.recompute_layers", c.recompute_layers);
  r.get("run.precision", c.precision);
  r.get("run.overlap_allreduce", c.overlap_allreduce);
  r.get("run.allreduce_bucket_mb", c.allreduce_bucket_mb);
  r.get("run.zero", c.zero);
  r.get("model.base", c.model_base);
  r.get_json("model.config", c.model_config);
  r.get("data.train", c.train_data);
  r.get("data.val", c.val_data);
  r.get("data.seq_len", c.seq_len);
  r.get("data.batch_size", c.batch_size);
  r.get("data.grad_accum", c.grad_accum);
  r.get("data.shuffle", c.shuffle);
  r.get("data.document_masking", c.document_masking);
  r.get("data.delimiter_id", c.delimiter_id);
  r.get("optimizer.lr", c.schedule.peak);
  r.get("optimizer.beta1", c.adamw.beta1);
  r.get("optimizer.beta2", c.adamw.beta2);
  r.get("optimizer.eps", c.adamw.eps);
  r.get("optimizer.weight_decay", c.adamw.weight_decay);
  r.get("optimizer.grad_clip", c.grad_clip);
  r.get("optimizer.decay_embeddings", c.decay_embeddings);
  r.get("schedule.kind", c.schedule.kind);
  r.get("schedule.steps", c.steps);
  r.get("schedule.warmup_steps", c.schedule.warmup_steps);
  r.get("schedule.final_fraction", c.schedule.final_fraction);
  r.get("schedule.decay_fraction", c.schedule.decay_fraction);
  r.get("schedule.decay_style", c.schedule.decay_style);
  r.get("eval.every", c.eval_every);
  r.get("eval.batches", c.eval_batches);
  r.get("eval.target_val_loss", c.target_val_loss);
  r.get("checkpoint.every", c.checkpoint_every);
  r.get("checkpoint.keep", c.keep_checkpoints);
  r.get("checkpoint.save_initial", c.save_initial);
  json prompts;
  r.get_json("samples.prompts", prompts);
  if (!prompts.is_null()) {
    LATHE_CHECK_ARG(prompts.is_array(), where, ": samples.prompts must be a list of strings");
    for (const auto& p : prompts) {
      LATHE_CHECK_ARG(p.is_string(), where, ": samples.prompts must be a list of strings");
      c.sample_prompts.push_back(p.get<std::string>());
    }
  }
  r.get("samples.max_tokens", c.sample_tokens);
  r.reject_leftovers();

  LATHE_CHECK_ARG(c.model_base.empty() != c.model_config.is_null(), where,
                  ": set exactly one of model.base (a Hugging Face folder) or model.config (config.json inline)");
  LATHE_CHECK_ARG(c.model_config.is_null() || c.model_config.is_object(), where, ": model.config must be a mapping");
  LATHE_CHECK_ARG(!c.train_data.empty(), where, ": data.train is required (shards from `lathe data prepare`)");
  LATHE_CHECK_ARG(c.seq_len > 0, where, ": data.seq_len must be positive");
  LATHE_CHECK_ARG(c.batch_size > 0, where, ": data.batch_size must be positive");
  LATHE_CHECK_ARG(c.grad_accum > 0, where, ": data.grad_accum must be positive");
  LATHE_CHECK_ARG(c.steps > 0, where, ": schedule.steps must be positive");
  LATHE_CHECK_ARG(c.grad_clip >= 0, where, ": optimizer.grad_clip must be >= 0");
  LATHE_CHECK_ARG(c.log_every > 0, where, ": run.log_every must be positive");
  LATHE_CHECK_ARG(c.overlap_allreduce == "auto" || c.overlap_allreduce == "on" || c.overlap_allreduce == "off", where,
                  ": run.overlap_allreduce must be auto, on or off");
  LATHE_CHECK_ARG(c.allreduce_bucket_mb > 0, where, ": run.allreduce_bucket_mb must be positive");
  LATHE_CHECK_ARG(c.zero == 0 || c.zero == 1, where, ": run.zero must be 0 or 1 (ZeRO-2/3 are out of scope)");
  LATHE_CHECK_ARG(c.eval_every >= 0 && c.checkpoint_every >= 0, where, ": eval.every and checkpoint.every must be >= 0");
  LATHE_CHECK_ARG(c.keep_checkpoints >= 1, where, ": checkpoint.keep must be at least 1");
  LATHE_CHECK_ARG(c.precision == "f32" || c.precision == "bf16", where, ": run.precision must be f32 or bf16, got ",
                  c.precision);
  c.resolved["run"]["precision"] = c.precision;  // the run folder says which arithmetic made it
  c.schedule.total_steps = c.steps;
  try {
    c.schedule.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str_cat(where, ": ", e.what()));
  }
  return c;
}

void apply_overrides(json& tree, const std::vector<std::string>& overrides) {
  for (const std::string& o : overrides) {
    const size_t eq = o.find('=');
    LATHE_CHECK_ARG(eq != std::string::npos && eq > 0, "override '", o, "' is not key=value (e.g. optimizer.lr=1e-3)");
    const std::string key = o.substr(0, eq);
    json value = yaml_to_json(o.substr(eq + 1), "override " + key);
    json* node = &tree;
    size_t start = 0;
    while (true) {
      const size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      LATHE_CHECK_ARG(!part.empty(), "override '", o, "': empty key part");
      if (!node->is_object()) *node = json::object();
      node = &(*node)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    *node = std::move(value);
  }
}

}  // namespace

json yaml_to_json(const std::string& yaml_text, const std::string& where) {
  try {
    return node_to_json(YAML::Load(yaml_text));
  } catch (const YAML::Exception& e) {
    throw FormatError(str_cat(where, ": invalid YAML at line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ",
                              e.msg));
  }
}

std::string json_to_yaml(const json& j) {
  YAML::Emitter e;
  emit(e, j);
  return std::string(e.c_str()) + "\n";
}

TrainConfig parse_recipe(const std::string& yaml_text, const std::vector<std::string>& overrides,
                         const std::string& where) {
  json tree = yaml_to_json(yaml_text, where);
  LATHE_CHECK_ARG(tree.is_object(), where, ": a recipe is a YAML mapping");
  apply_overrides(tree, overrides);
  return from_tree(std::move(tree), where);
}

TrainConfig load_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  json tree = read_recipe_tree(path, 0);
  apply_overrides(tree, overrides);
  // Relative data and model paths stay relative to the working directory, as on the command line.
  return from_tree(std::move(tree), path);
}

}  // namespace lathe::train
