// Token embedding lookup (the first op of every model; tied heads reuse the same weight).
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// out[..., :] = weight[ids[...], :].  weight [V, C] f32, bf16 or f16 (16-bit: inference only, no gradient);
// ids [...] i32, each in [0, V) (else InvalidArgument naming the id) -> out [..., C] f32.
// Gradient: dense dweight [V, C], rows scatter-added from the output gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids);

}  // namespace lathe
