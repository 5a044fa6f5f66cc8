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
  const std::string loss = r.choice("loss_type", "sigmoid", dpo_loss_from_name, o.loss.type,
                                    "must be sigmoid, robust, hinge, ipo, simpo, orpo or kto");
  const bool kto = o.loss.type == DpoLossType::kKto;
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
  r.checked("rpo_alpha", o.loss.rpo_alpha == 0 || !kto, o.loss.rpo_alpha,
            "kto has no chosen answers to add an NLL term on");
  r.get("simpo_gamma", o.loss.simpo_gamma);
  r.get("desirable_weight", o.loss.desirable_weight);
  r.checked("desirable_weight", o.loss.desirable_weight > 0, o.loss.desirable_weight, "must be positive");
  r.get("undesirable_weight", o.loss.undesirable_weight);
  r.checked("undesirable_weight", o.loss.undesirable_weight > 0, o.loss.undesirable_weight, "must be positive");
  r.checked("desirable_weight", kto || (o.loss.desirable_weight == 1 && o.loss.undesirable_weight == 1),
            o.loss.desirable_weight, "desirable_weight and undesirable_weight apply to loss_type kto only");
  r.get("reference_free", o.reference_free);
  r.get("ref_model", o.ref_model);
  r.get("cache_ref_log_probs", o.cache_ref_logps);
  r.reject_unknown();
  LATHE_CHECK_ARG(!o.tokenizer.empty(), where, ": DPO needs a tokenizer: set model.base (a Hugging Face folder with"
                  " tokenizer.json) or dpo.tokenizer");
  LATHE_CHECK_ARG(!o.needs_reference() || o.lora || !o.ref_model.empty() || !c.model_base.empty(), where,
                  ": DPO needs a reference model: set model.base (the reference is its frozen copy), dpo.ref_model,"
                  " or dpo.reference_free: true");

  // z0 is a mean over the batch's mismatched pairs, each prompt with another example's answer (TRL refuses
  // per_device_train_batch_size 1 as well).
  LATHE_CHECK_ARG(!kto || o.batch_size > 1, where, ": dpo.loss_type kto needs data.batch_size > 1 (got ",
                  o.batch_size, "): its KL estimate z0 pairs each prompt with another example's completion in the"
                  " micro-batch");

  json& s = c.resolved["dpo"];  // every default, written
  s["max_length"] = e.max_length;
  s["truncation_mode"] = truncation;
  s["loss_type"] = loss;
  s["beta"] = o.loss.beta;
  s["label_smoothing"] = o.loss.label_smoothing;
  s["rpo_alpha"] = o.loss.rpo_alpha;
  s["simpo_gamma"] = o.loss.simpo_gamma;
  s["desirable_weight"] = o.loss.desirable_weight;
  s["undesirable_weight"] = o.loss.undesirable_weight;
  s["reference_free"] = o.reference_free;
  s["cache_ref_log_probs"] = o.cache_ref_logps;
  return o;
}

}  // namespace lathe::posttrain
