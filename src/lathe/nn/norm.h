// A norm's parameters. Its kind (RMSNorm or LayerNorm), epsilon and (1 + w) offset are the model's
// (ModelConfig), so one struct serves every family.
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

struct Norm {
  Tensor weight;  // [C] (or [D] for per-head q/k norms)
  Tensor bias;    // [C] LayerNorm's shift, or undefined (RMSNorm)
};

}  // namespace lathe
