// The `distill:` section of a recipe (docs/distill.md): logit distillation from a frozen teacher, run in-process
// (distill.teacher) or read from its top-k logits on disk (distill.teacher_logits), on the dataset's completions
// or, with distill.lmbda / seq_kd, on completions sampled from the student / teacher (on-policy GKD).
// The data keys are SFT's (data.*, and sft.max_length, packing, masks, ... from an optional sft: section);
// every distill key is checked like the sft ones. Defaults: Tunix's LogitStrategy (τ 2.0, α 0.5, T² on) with
// TRL's GKD β 0.5 for the JSD (specs/posttrain.md §7), written into the resolved recipe.
#pragma once

#include <string>

#include "lathe/posttrain/distill_loss.h"
#include "lathe/posttrain/sft_options.h"

namespace lathe::posttrain {

struct DistillOptions {
  SftOptions sft;            // data and encoding (sft.loss_type is not used: the hard-label term is the NLL)
  std::string teacher;       // distill.teacher: a Hugging Face folder with the student's vocabulary
  std::string teacher_logits;  // distill.teacher_logits: a teacher cache (teacher_cache.h) instead; exactly
                               // one of teacher and teacher_logits is set
  DistillLossOptions loss;   // distill.loss (forward_kl | reverse_kl | jsd), beta, temperature,
                             // temperature_squared, alpha, chunk_rows, top_k
  // On-policy GKD (TRL GKDConfig; docs/distill.md "On-policy distillation"): each optimizer step, with
  // probability lmbda, the step's completions are sampled from the student; else, with seq_kd, from the teacher.
  double lmbda = 0;                   // distill.lmbda in [0, 1]; 0: offline (the dataset's completions)
  bool seq_kd = false;                // distill.seq_kd: the teacher's samples on the steps the student does not sample
  int64_t max_new_tokens = 128;       // distill.max_new_tokens: cap of every sampled completion
  double sampling_temperature = 0.9;  // distill.sampling_temperature (TRL GKD's `temperature`); 0: greedy
  bool samples() const { return lmbda > 0 || seq_kd; }  // any step may sample
};

// From a resolved recipe whose `distill` is set (an absent sft: section reads as `sft: {}`); writes the
// defaults it applied into c.resolved["distill"] (and ["sft"]).
DistillOptions distill_options(train::TrainConfig& c);

const char* divergence_name(Divergence d);

}  // namespace lathe::posttrain
