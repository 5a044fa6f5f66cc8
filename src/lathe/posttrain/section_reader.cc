#include "lathe/posttrain/section_reader.h"

namespace lathe::posttrain {

std::string read_encoder_keys(SectionReader& r, EncoderOptions& e, std::string& tokenizer) {
  r.get("max_length", e.max_length);
  r.checked("max_length", e.max_length >= 2, e.max_length, "must be at least 2 (a token and its successor)");
  std::string truncation = "keep_start";
  r.get("truncation_mode", truncation);
  r.checked("truncation_mode", truncation == "keep_start" || truncation == "keep_end", truncation,
            "must be keep_start or keep_end");
  e.truncation = truncation == "keep_end" ? Truncation::kKeepEnd : Truncation::kKeepStart;
  r.get("tokenizer", tokenizer);
  if (const nlohmann::json* kw = r.find("chat_template_kwargs")) {
    r.checked("chat_template_kwargs", kw->is_object(), *kw, "must be a mapping of template variables");
    e.template_kwargs = nlohmann::ordered_json::parse(kw->dump());
  }
  return truncation;
}

}  // namespace lathe::posttrain
