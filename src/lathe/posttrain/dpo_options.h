// The `dpo:` section of a recipe (docs/dpo.md), with the data.* and run.* keys the DPO objective reads.
// Every key is checked: an unknown key, a wrong type or an impossible value is an InvalidArgument naming the
// recipe and the key. Defaults are TRL's DPOConfig / CPOConfig / ORPOConfig / KTOConfig @f2cd5771 (specs/posttrain.md
// §4, §7), written into the resolved recipe so a run folder says what it trained with.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/posttrain/dpo_loss.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/train/recipe.h"

namespace lathe::posttrain {

struct DpoOptions {
  std::string train_data, val_data;  // data.train / data.val: preference JSON Lines (prompt/chosen/rejected;
                                     // kto: unpaired prompt/completion/label)
  std::string tokenizer;             // dpo.tokenizer, else model.base
  EncoderOptions encoder;            // dpo.max_length, truncation_mode, chat_template_kwargs
  DpoLossConfig loss;                // dpo.loss_type, beta, label_smoothing, rpo_alpha, simpo_gamma,
                                     // desirable_weight, undesirable_weight
  bool reference_free = false;       // dpo.reference_free: the reference log-probs are 0
  std::string ref_model;             // dpo.ref_model: the frozen reference ("" = model.base, or with LoRA the
                                     // same model with the adapter off)
  bool cache_ref_logps = true;       // dpo.cache_ref_log_probs: each example's reference log-probs once
  std::string model_base;            // model.base: the frozen reference of a full fine-tuning run
  bool lora = false;                 // the recipe has a lora: section (the policy is base + adapter)
  int64_t batch_size = 0;            // data.batch_size: preference pairs (kto: examples) per micro-batch, all ranks
  int64_t grad_accum = 1;            // data.grad_accum
  uint64_t seed = 0;                 // run.seed: the pair order of each epoch
  bool shuffle = true;               // data.shuffle
  int64_t eval_batches = 8;          // eval.batches

  // A frozen reference model is needed (not reference-free, not SimPO / ORPO).
  bool needs_reference() const { return !reference_free && loss_needs_reference(loss.type); }
};

// From a resolved recipe whose `dpo` is set; writes the defaults it applied into c.resolved["dpo"].
DpoOptions dpo_options(train::TrainConfig& c);

}  // namespace lathe::posttrain
