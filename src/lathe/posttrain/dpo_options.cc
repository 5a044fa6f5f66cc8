#include "lathe/posttrain/dpo_options.h"

#include <set>

#include "lathe/base/error.h"

namespace lathe::posttrain {

using nlohmann::json;

namespace {

// Reads dpo.<key> with a type check; absent (or null) keys keep `out`.
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
  void get(const char* key, double& out) {
    if (const json* v = find(key)) out = checked(key, v->is_number(), *v, "expected a number").get<double>();
  }
  void get(const char* key, std::string& out) {
    if (const json* v = find(key)) out = checked(key, v->is_string(), *v, "expected a string").get<std::string>();
  }
  template <class T>
  const T& checked(const char* key, bool ok, const T& v, const std::string& rule) const {
    if (!ok) throw InvalidArgument(str_cat(where_, ": dpo.", key, " = ", json(v).dump(), ": ", rule));
    return v;
  }
  void reject_unknown() const {
    for (auto it = s_.begin(); it != s_.end(); ++it)
      if (!seen_.count(it.key()))
        throw InvalidArgument(str_cat(where_, ": unknown key dpo.", it.key(), " (docs/dpo.md lists every key)"));
  }

 private:
  const json& s_;
  std::string where_;
  std::set<std::string> seen_;
};

}  // namespace

DpoOptions dpo_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.dpo.is_null(), where, ": no dpo: section (write `dpo: {}` for TRL's defaults)");
  DpoOptions o;
  o.train_data = c.train_data;
  o.val_data = c.val_data;
  o.batch_size = c.batch_size;
  o.grad_accum = c.grad_accum;
  o.seed = c.seed;
  o.shuffle = c.shuffle;
  o.eval_batches = c.eval_batches;
  o.tokenizer = c.model_base;
  o.lora = !c.lora.is_null();
  o.model_base = c.model_base;

  SectionReader r(c.dpo, where);
  EncoderOptions& e = o.encoder;
  r.get("max_length", e.max_length);
  r.checked("max_length", e.max_length >= 2, e.max_length, "must be at least 2 (a token and its successor)");
  std::string truncation = "keep_start", loss = "sigmoid";
  r.get("truncation_mode", truncation);
  r.checked("truncation_mode", truncation == "keep_start" || truncation == "keep_end", truncation,
            "must be keep_start or keep_end");
  e.truncation = truncation == "keep_end" ? Truncation::kKeepEnd : Truncation::kKeepStart;
  r.get("loss_type", loss);
  o.loss.type = dpo_loss_from_name(loss);
  r.checked("loss_type", o.loss.type != DpoLossType::kCount, loss, "must be sigmoid, robust, hinge, ipo, simpo or orpo");
  r.get("beta", o.loss.beta);
  r.checked("beta", o.loss.beta > 0, o.loss.beta, "must be positive");
  r.get("label_smoothing", o.loss.label_smoothing);
  r.checked("label_smoothing", o.loss.label_smoothing >= 0 && o.loss.label_smoothing < 0.5, o.loss.label_smoothing,
            "must be in [0, 0.5)");
  r.checked("label_smoothing",
            o.loss.label_smoothing == 0 || o.loss.type == DpoLossType::kSigmoid || o.loss.type == DpoLossType::kRobust ||
                o.loss.type == DpoLossType::kSimpo,
            o.loss.label_smoothing, "applies to loss_type sigmoid, robust or simpo only");
  r.get("rpo_alpha", o.loss.rpo_alpha);
  r.checked("rpo_alpha", o.loss.rpo_alpha >= 0, o.loss.rpo_alpha, "must be >= 0 (0: no NLL term)");
  r.get("simpo_gamma", o.loss.simpo_gamma);
  r.get("reference_free", o.reference_free);
  r.get("ref_model", o.ref_model);
  r.get("cache_ref_log_probs", o.cache_ref_logps);
  r.get("tokenizer", o.tokenizer);
  if (const json* kw = r.find("chat_template_kwargs")) {
    r.checked("chat_template_kwargs", kw->is_object(), *kw, "must be a mapping of template variables");
    e.template_kwargs = nlohmann::ordered_json::parse(kw->dump());
  }
  r.reject_unknown();
  LATHE_CHECK_ARG(!o.tokenizer.empty(), where, ": DPO needs a tokenizer: set model.base (a Hugging Face folder with"
                  " tokenizer.json) or dpo.tokenizer");
  LATHE_CHECK_ARG(!o.needs_reference() || o.lora || !o.ref_model.empty() || !c.model_base.empty(), where,
                  ": DPO needs a reference model: set model.base (the reference is its frozen copy), dpo.ref_model,"
                  " or dpo.reference_free: true");

  json& s = c.resolved["dpo"];  // every default, written
  s["max_length"] = e.max_length;
  s["truncation_mode"] = truncation;
  s["loss_type"] = loss;
  s["beta"] = o.loss.beta;
  s["label_smoothing"] = o.loss.label_smoothing;
  s["rpo_alpha"] = o.loss.rpo_alpha;
  s["simpo_gamma"] = o.loss.simpo_gamma;
  s["reference_free"] = o.reference_free;
  s["cache_ref_log_probs"] = o.cache_ref_logps;
  return o;
}

}  // namespace lathe::posttrain
