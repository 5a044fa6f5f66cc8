#include "lathe/posttrain/sft_options.h"

#include "lathe/base/error.h"
#include "lathe/posttrain/section_reader.h"

namespace lathe::posttrain {

using nlohmann::json;

SftOptions sft_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.sft.is_null(), where, ": no sft: section (write `sft: {}` for TRL's defaults)");
  SftOptions o;
  copy_row_data_keys(c, o);

  SectionReader r(c.sft, where, "sft");
  EncoderOptions& e = o.encoder;
  const std::string truncation = read_encoder_keys(r, e, o.tokenizer);
  std::string strategy = "bfd", loss = "nll";
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
