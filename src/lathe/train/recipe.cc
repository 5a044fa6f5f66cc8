#include "lathe/train/recipe.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/base/thread_pool.h"
#include "lathe/io/file_read.h"
#include "lathe/models/config.h"
#include "lathe/tensor/quant_weight.h"
#include "lathe/train/memory_plan.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

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
  // A FIFO, folder or device (also as a base_recipe) is refused naming it, without blocking.
  json tree = yaml_to_json(read_file(path), path);
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
        // In range of the field's type: a value that does not fit must not wrap or truncate silently.
        const bool fits = node->is_number_unsigned()
                              ? node->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                              : std::in_range<T>(node->get<int64_t>());
        LATHE_CHECK_ARG(fits, "out of range (", std::numeric_limits<T>::min(), " to ", std::numeric_limits<T>::max(),
                        ")");
      } else if constexpr (std::is_floating_point_v<T>) {
        LATHE_CHECK_ARG(node->is_number() && std::isfinite(node->get<double>()), "expected a finite number");
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

// Reports a key whose value breaks its rule as "<recipe>: key = value: rule".
class RuleCheck {
 public:
  explicit RuleCheck(const std::string& where) : where_(where.empty() ? "recipe" : where) {}
  template <class V>
  void operator()(bool ok, const char* key, const V& value, const std::string& rule) const {
    if (ok) return;
    if constexpr (std::is_convertible_v<V, std::string>) {
      throw InvalidArgument(str_cat(where_, ": ", key, " = '", std::string(value), "': ", rule));
    } else {
      throw InvalidArgument(str_cat(where_, ": ", key, " = ", value, ": ", rule));
    }
  }

 private:
  std::string where_;
};

bool one_of(const std::string& s, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (s == o) return true;
  return false;
}

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
  r.get("run.collective_timeout", c.collective_timeout);
  r.get("model.base", c.model_base);
  r.get_json("model.config", c.model_config);
  r.get("model.quantize", c.model_quantize);
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
  json budget;
  r.get_json("memory.budget", budget);
  if (budget.is_string()) {
    c.memory_budget = parse_byte_size(budget.get<std::string>(), where + ": memory.budget");
  } else if (!budget.is_null()) {  // a bare integer: bytes
    LATHE_CHECK_ARG(budget.is_number_integer() && budget.get<int64_t>() >= 1, where, ": memory.budget = ",
                    budget.dump(), ": expected a size such as 20GiB, 500MB or a positive number of bytes");
    c.memory_budget = budget.get<int64_t>();
  }
  r.get("memory.check", c.memory_check);
  // Checked key by key by their objectives.
  const std::pair<const char*, json*> sections[] = {
      {"sft", &c.sft}, {"lora", &c.lora}, {"dpo", &c.dpo}, {"distill", &c.distill}, {"grpo", &c.grpo}};
  for (auto [section, out] : sections) {
    if (!tree.contains(section)) continue;
    json& v = tree[section];
    LATHE_CHECK_ARG(v.is_null() || v.is_object(), where, ": ", section, " must be a mapping");
    *out = v.is_null() ? json::object() : v;
    tree.erase(section);
  }
  r.reject_leftovers();

  c.resolved["run"]["precision"] = c.precision;  // the run folder says which arithmetic made it
  c.schedule.total_steps = c.steps;
  c.recipe_path = where;
  validate_recipe(c);
  return c;
}

}  // namespace

void validate_recipe(const TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  const RuleCheck check(where);
  LATHE_CHECK_ARG(c.model_base.empty() != c.model_config.is_null(), where,
                  ": set exactly one of model.base (a Hugging Face folder) or model.config (config.json inline)");
  LATHE_CHECK_ARG(c.model_config.is_null() || c.model_config.is_object(), where, ": model.config must be a mapping");
  if (!c.model_quantize.empty()) {
    try {
      parse_quant_spec(c.model_quantize);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str_cat(where, ": model.quantize: ", e.what()));
    }
    LATHE_CHECK_ARG(!c.lora.is_null(), where, ": model.quantize '", c.model_quantize,
                    "' freezes the base in a quantised format: it trains LoRA adapters on it (QLoRA), so it needs a "
                    "lora: section");
  }
  // run
  check(!c.run_dir.empty(), "run.dir", c.run_dir, "must name a folder");
  check(c.threads >= 0 && c.threads <= kMaxThreadCount, "run.threads", c.threads,
        str_cat("must be in [0, ", kMaxThreadCount, "] (0: all cores)"));
  check(c.log_every >= 1, "run.log_every", c.log_every, "must be at least 1");
  check(one_of(c.precision, {"f32", "bf16"}), "run.precision", c.precision, "must be f32 or bf16");
  check(one_of(c.overlap_allreduce, {"auto", "on", "off"}), "run.overlap_allreduce", c.overlap_allreduce,
        "must be auto, on or off");
  check(c.allreduce_bucket_mb > 0, "run.allreduce_bucket_mb", c.allreduce_bucket_mb, "must be positive");
  check(c.zero == 0 || c.zero == 1, "run.zero", c.zero, "must be 0 or 1 (ZeRO-2/3 are out of scope)");
  check(c.collective_timeout >= 0, "run.collective_timeout", c.collective_timeout,
        "must be seconds >= 0 (0: no timeout)");
  // data: B * T tokens of int32 ids per micro-batch
  LATHE_CHECK_ARG(c.sft.is_null() || c.dpo.is_null(), where,
                  ": an sft: and a dpo: section: a recipe trains one objective (lathe sft or lathe dpo)");
  LATHE_CHECK_ARG(c.dpo.is_null() || c.distill.is_null(), where,
                  ": a dpo: and a distill: section: a recipe trains one objective (lathe dpo or lathe distill)");
  LATHE_CHECK_ARG(c.grpo.is_null() || (c.sft.is_null() && c.dpo.is_null() && c.distill.is_null()), where,
                  ": a grpo: section with an sft:, dpo: or distill: one: a recipe trains one objective");
  if (c.sft.is_null() && c.dpo.is_null() && c.distill.is_null() && c.grpo.is_null()) {
    LATHE_CHECK_ARG(!c.train_data.empty(), where, ": data.train is required (shards from `lathe data prepare`)");
    check(c.seq_len >= 1, "data.seq_len", c.seq_len, "must be at least 1 (data.seq_len is required)");
  } else {  // SFT / DPO / distillation / GRPO: rows of JSON Lines examples (GRPO: prompts)
    const std::string kind = !c.dpo.is_null()       ? "DPO"
                             : !c.distill.is_null() ? "distillation"
                             : !c.grpo.is_null()    ? "GRPO"
                                                    : "SFT",
                      section = !c.dpo.is_null() ? "dpo" : !c.grpo.is_null() ? "grpo" : "sft";
    LATHE_CHECK_ARG(!c.train_data.empty(), where, ": data.train is required (a .jsonl file or a folder of them)");
    check(c.seq_len == 0, "data.seq_len", c.seq_len, str_cat("is not used by ", kind, ": set ", section,
                  section == "grpo" ? ".max_completion_length" : ".max_length"));
    check(!c.document_masking, "data.document_masking", "true",
          str_cat("is not used by ", kind, ": examples never attend to each other"));
  }
  check(c.batch_size >= 1, "data.batch_size", c.batch_size, "must be at least 1 (data.batch_size is required)");
  check(c.seq_len == 0 || c.batch_size <= INT32_MAX / c.seq_len, "data.batch_size", c.batch_size,
        str_cat("times data.seq_len = ", c.seq_len, " must stay below 2^31 tokens per micro-batch"));
  check(c.grad_accum >= 1, "data.grad_accum", c.grad_accum, "must be at least 1");
  check(c.delimiter_id >= -1, "data.delimiter_id", c.delimiter_id, "must be a token id, or -1 (from the manifest)");
  // optimizer
  check(c.schedule.peak > 0, "optimizer.lr", c.schedule.peak, "must be positive");
  check(c.adamw.beta1 >= 0 && c.adamw.beta1 < 1, "optimizer.beta1", c.adamw.beta1, "must be in [0, 1)");
  check(c.adamw.beta2 >= 0 && c.adamw.beta2 < 1, "optimizer.beta2", c.adamw.beta2, "must be in [0, 1)");
  check(c.adamw.eps > 0, "optimizer.eps", c.adamw.eps, "must be positive");
  check(c.adamw.weight_decay >= 0, "optimizer.weight_decay", c.adamw.weight_decay, "must be >= 0");
  check(c.grad_clip >= 0, "optimizer.grad_clip", c.grad_clip, "must be >= 0 (0: off)");
  // schedule
  check(one_of(c.schedule.kind, {"constant", "cosine", "linear", "wsd"}), "schedule.kind", c.schedule.kind,
        "must be constant, cosine, linear or wsd");
  check(c.steps >= 1, "schedule.steps", c.steps, "must be at least 1 (schedule.steps is required)");
  check(c.schedule.warmup_steps >= 0 && c.schedule.warmup_steps <= c.steps, "schedule.warmup_steps",
        c.schedule.warmup_steps, str_cat("must be in [0, schedule.steps = ", c.steps, "]"));
  check(c.schedule.final_fraction >= 0 && c.schedule.final_fraction <= 1, "schedule.final_fraction",
        c.schedule.final_fraction, "must be in [0, 1]");
  check(c.schedule.decay_fraction >= 0 && c.schedule.decay_fraction <= 1, "schedule.decay_fraction",
        c.schedule.decay_fraction, "must be in [0, 1]");
  check(one_of(c.schedule.decay_style, {"1-sqrt", "linear", "cosine"}), "schedule.decay_style", c.schedule.decay_style,
        "must be 1-sqrt, linear or cosine");
  // evaluation: with validation data, at least one batch (a mean over none is NaN in metrics.jsonl)
  check(c.eval_every >= 0, "eval.every", c.eval_every, "must be >= 0 (0: only at the end)");
  check(c.eval_batches >= (c.val_data.empty() ? 0 : 1), "eval.batches", c.eval_batches,
        "must be at least 1 when data.val is set (leave data.val out to skip evaluation)");
  check(c.target_val_loss >= 0, "eval.target_val_loss", c.target_val_loss, "must be >= 0 (0: none)");
  // checkpoints
  check(c.checkpoint_every >= 0, "checkpoint.every", c.checkpoint_every, "must be >= 0 (0: only at the end)");
  check(c.keep_checkpoints >= 1, "checkpoint.keep", c.keep_checkpoints, "must be at least 1");
  check(c.memory_budget >= 0, "memory.budget", c.memory_budget, "must be a positive size");
  check(one_of(c.memory_check, {"error", "warn", "off"}), "memory.check", c.memory_check,
        "must be error, warn or off");
  // samples
  check(c.sample_tokens >= 1, "samples.max_tokens", c.sample_tokens, "must be at least 1");
  try {  // the schedule's own rules (a backstop: every one of them is checked above with its key)
    c.schedule.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str_cat(where, ": ", e.what()));
  }
}

void validate_recipe_for_model(const TrainConfig& c, const ModelConfig& m) {
  if (m.max_positions <= 0) return;  // the family sets no context limit
  const RuleCheck check(c.recipe_path);
  check(c.seq_len <= m.max_positions, "data.seq_len", c.seq_len,
        str_cat("exceeds the model's context (max_position_embeddings = ", m.max_positions, ")"));
  // A sample is the opening delimiter (and the prompt's tokens) plus max_tokens generated ones.
  check(c.sample_prompts.empty() || c.sample_tokens < m.max_positions, "samples.max_tokens", c.sample_tokens,
        str_cat("leaves no room for the prompt in the model's context (max_position_embeddings = ", m.max_positions,
                ")"));
}

namespace {

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
      const std::string why = recipe_key_problem(part);
      LATHE_CHECK_ARG(why.empty(), "override '", o.substr(0, 80), "': ", why);
      if (!node->is_object()) *node = json::object();
      node = &(*node)[part];
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    *node = std::move(value);
  }
}

}  // namespace

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
