// freeze_base_for_lora and lora_optim_params (see lora_params.h).
#include "lathe/train/lora_params.h"

namespace lathe::train {

void freeze_base_for_lora(Model& m, LoraAdapters& adapters) {
  m.set_requires_grad(false);
  adapters.set_requires_grad(true);
}

std::vector<OptimParam> lora_optim_params(LoraAdapters& adapters) {
  std::vector<OptimParam> out;
  adapters.for_each_param([&](const std::string& name, Tensor& t, int) { out.push_back({name, t, true}); });
  return out;
}

}  // namespace lathe::train
