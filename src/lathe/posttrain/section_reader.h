// Reads one post-training recipe section (sft:, dpo:, distill:) key by key with a type check, and refuses
// keys nobody read: every error names "<section>.<key>", its value and the rule it breaks.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/train/recipe.h"

namespace lathe::posttrain {

class SectionReader {
 public:
  // section: the recipe's mapping; where: the recipe file (for messages); name: "sft" (for "sft.<key>" and
  // the docs page docs/<name>.md that lists every key).
  SectionReader(const nlohmann::json& section, std::string where, std::string name)
      : s_(section), where_(std::move(where)), name_(std::move(name)) {}

  // The key's value (nullptr when absent or null); the key counts as read either way.
  const nlohmann::json* find(const char* key) {
    seen_.insert(key);
    return s_.contains(key) && !s_[key].is_null() ? &s_[key] : nullptr;
  }
  // Absent (or null) keys keep `out`.
  void get(const char* key, bool& out) {
    if (const nlohmann::json* v = find(key)) out = checked(key, v->is_boolean(), *v, "expected true or false").get<bool>();
  }
  void get(const char* key, int64_t& out) {
    if (const nlohmann::json* v = find(key))
      out = checked(key, v->is_number_integer(), *v, "expected an integer").get<int64_t>();
  }
  void get(const char* key, double& out) {
    if (const nlohmann::json* v = find(key)) out = checked(key, v->is_number(), *v, "expected a number").get<double>();
  }
  void get(const char* key, std::string& out) {
    if (const nlohmann::json* v = find(key))
      out = checked(key, v->is_string(), *v, "expected a string").get<std::string>();
  }
  // A key naming one of an enum's values (fallback when absent): out = from_name(name), which returns
  // E::kCount for an unknown name, refused with `rule`. Returns the name, for the resolved recipe.
  template <class E, class FromName>
  std::string choice(const char* key, const char* fallback, FromName from_name, E& out, const std::string& rule) {
    std::string name = fallback;
    get(key, name);
    out = from_name(name);
    checked(key, out != E::kCount, name, rule);
    return name;
  }
  // v when ok, else InvalidArgument "<where>: <name>.<key> = <v>: <rule>".
  template <class T>
  const T& checked(const char* key, bool ok, const T& v, const std::string& rule) const {
    if (!ok) throw InvalidArgument(str_cat(where_, ": ", name_, ".", key, " = ", nlohmann::json(v).dump(), ": ", rule));
    return v;
  }
  // InvalidArgument naming the first key no find() / get() asked for.
  void reject_unknown() const {
    for (auto it = s_.begin(); it != s_.end(); ++it)
      if (!seen_.count(it.key()))
        throw InvalidArgument(str_cat(where_, ": unknown key ", name_, ".", it.key(), " (docs/", name_,
                                      ".md lists every key)"));
  }

 private:
  const nlohmann::json& s_;
  std::string where_, name_;
  std::set<std::string> seen_;
};

// The recipe keys outside the section that every objective on rows of JSON Lines data reads (SftOptions,
// DpoOptions): data.train / val / batch_size / grad_accum / shuffle, run.seed, eval.batches, and model.base
// as the default tokenizer.
template <class Options>
void copy_row_data_keys(const train::TrainConfig& c, Options& o) {
  o.train_data = c.train_data;
  o.val_data = c.val_data;
  o.batch_size = c.batch_size;
  o.grad_accum = c.grad_accum;
  o.seed = c.seed;
  o.shuffle = c.shuffle;
  o.eval_batches = c.eval_batches;
  o.tokenizer = c.model_base;
}

// The example-encoder keys every section of row data (sft:, dpo:) has: max_length (>= 2), truncation_mode
// (keep_start | keep_end), tokenizer and chat_template_kwargs. Returns truncation_mode's name, for the
// resolved recipe.
std::string read_encoder_keys(SectionReader& r, EncoderOptions& e, std::string& tokenizer);

}  // namespace lathe::posttrain
