#include "lathe/posttrain/dpo_options.h"

#include "lathe/base/error.h"
#include "lathe/posttrain/section_reader.h"

namespace lathe::posttrain {

using nlohmann::json;

DpoOptions dpo_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.dpo.is_null(), where, ": no dpo: section (write `dpo: {}` for TRL's defaults)");
  DpoOptions o;
  copy_row_data_keys(c, o);
  o.lora = !c.lora.is_null();
  o.model_base = c.model_base;

  SectionReader r(c.dpo, where, "dpo");
  EncoderOptions& e = o.encoder;
  const std::string truncation = read_encoder_keys(r, e, o.tokenizer);
  std::string loss = "sigmoid";
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
