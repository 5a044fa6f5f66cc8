// The list of supported families: HF architecture / model_type -> Family.
#include "lathe/base/error.h"
#include "lathe/models/family.h"

namespace lathe {

extern const Family kLlamaFamily, kMistralFamily, kQwen2Family, kQwen3Family, kQwen3MoeFamily, kGemma2Family,
    kGemma3Family, kGpt2Family;

const std::vector<const Family*>& all_families() {
  static const std::vector<const Family*> families = {&kLlamaFamily,    &kMistralFamily, &kQwen2Family,
                                                      &kQwen3Family,    &kQwen3MoeFamily, &kGemma2Family,
                                                      &kGemma3Family,   &kGpt2Family};
  return families;
}

const Family& find_family(const nlohmann::json& hf) {
  std::string arch, model_type;
  if (hf.contains("architectures") && hf["architectures"].is_array() && !hf["architectures"].empty() &&
      hf["architectures"][0].is_string())
    arch = hf["architectures"][0].get<std::string>();
  if (hf.contains("model_type") && hf["model_type"].is_string()) model_type = hf["model_type"].get<std::string>();
  for (const Family* f : all_families())
    for (const std::string& a : f->architectures)
      if (a == arch) return *f;
  for (const Family* f : all_families())
    for (const std::string& t : f->model_types)
      if (t == model_type) return *f;
  std::string supported;
  for (const Family* f : all_families()) supported += std::string(supported.empty() ? "" : ", ") + f->architectures[0];
  throw NotImplemented(str_cat("unsupported architecture '", arch.empty() ? model_type : arch,
                               "' (supported: ", supported, ")"));
}

}  // namespace lathe
