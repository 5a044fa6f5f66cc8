#include "lathe/posttrain/sft_options.h"

#include <set>

#include "lathe/base/error.h"

namespace lathe::posttrain {

using nlohmann::json;

namespace {

// Reads sft.<key> with a type check; absent keys keep `out`.
class SectionReader {
 public:
  SectionReader(const json& section, std::string where) : s_(section), where_(std::move(where)) {}
  const json* find(const char* key) {
    seen_.insert(key);
    return s_.contains(key) && !s_[key].is_null() ? &s_[key] : nullptr;
  }
  void get(const char* key, bool& out) {
    if (const json* v = find(key)) out = checked(key, v->is_boolean(), *v, "expected true or false").get<bool>();
  }
  void get(const char* key, int64_t& out) {
    if (const json* v = find(key)) out = checked(key, v->is_number_integer(), *v, "expected an integer").get<int64_t>();
  }
  void get(const char* key, std::string& out) {
    if (const json* v = find(key)) out = checked(key, v->is_string(), *v, "expected a string").get<std::string>();
  }
  const json& checked(const char* key, bool ok, const json& v, const std::string& rule) const {
    if (!ok) throw InvalidArgument(str_cat(where_, ": sft.", key, " = ", v.dump(), ": ", rule));
    return v;
  }
  void reject_unknown() const {
    for (auto it = s_.begin(); it != s_.end(); ++it)
      if (!seen_.count(it.key()))
        throw InvalidArgument(str_cat(where_, ": unknown key sft.", it.key(), " (docs/sft.md lists every key)"));
  }

 private:
  const json& s_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace

SftOptions sft_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.sft.is_null(), where, ": no sft: section (write `sft: {}` for TRL's defaults)");
  SftOptions o;
  o.train_data = c.train_data;
  o.val_data = c.val_data;
  o.batch_size = c.batch_size;
  o.grad_accum = c.grad_accum;
  o.seed = c.seed;
  o.shuffle = c.shuffle;
  o.eval_batches = c.eval_batches;
  o.tokenizer = c.model_base;

  SectionReader r(c.sft, where);
  EncoderOptions& e = o.encoder;
  r.get("max_length", e.max_length);
  r.checked("max_length", e.max_length >= 2, e.max_length, "must be at least 2 (a token and its successor)");
  std::string truncation = "keep_start", strategy = "bfd", loss = "nll";
  r.get("truncation_mode", truncation);
  r.checked("truncation_mode", truncation == "keep_start" || truncation == "keep_end", truncation,
            "must be keep_start or keep_end");
  e.truncation = truncation == "keep_end" ? Truncation::kKeepEnd : Truncation::kKeepStart;
  bool packing = false;
  r.get("packing", packing);
  r.get("packing_strategy", strategy);
  r.checked("packing_strategy", strategy == "bfd" || strategy == "wrapped", strategy,
            "must be bfd (whole examples, attention inside each) or wrapped (concatenated, attention across examples)");
  o.packing = !packing ? Packing::kNone : strategy == "wrapped" ? Packing::kWrapped : Packing::kBfd;
  r.get("completion_only_loss", e.completion_only_loss);  // TRL: None = auto = on for prompt-completion data
  r.get("assistant_only_loss", e.assistant_only_loss);
  r.get("loss_type", loss);
  r.checked("loss_type", loss == "nll" || loss == "dft", loss, "must be nll or dft");
  o.loss = loss == "dft" ? SftLoss::kDft : SftLoss::kNll;
  r.get("tokenizer", o.tokenizer);
  if (const json* kw = r.find("chat_template_kwargs")) {
    r.checked("chat_template_kwargs", kw->is_object(), *kw, "must be a mapping of template variables");
    e.template_kwargs = nlohmann::ordered_json::parse(kw->dump());
  }
  r.reject_unknown();
  LATHE_CHECK_ARG(!o.tokenizer.empty(), where, ": SFT needs a tokenizer: set model.base (a Hugging Face folder with"
                  " tokenizer.json) or sft.tokenizer");

  json& s = c.resolved["sft"];  // every default, written
  s["max_length"] = e.max_length;
  s["truncation_mode"] = truncation;
  s["packing"] = packing;
  s["packing_strategy"] = strategy;
  s["completion_only_loss"] = e.completion_only_loss;
  s["assistant_only_loss"] = e.assistant_only_loss;
  s["loss_type"] = loss;
  return o;
}

}  // namespace lathe::posttrain
