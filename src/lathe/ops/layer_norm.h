// LayerNorm over the last dimension (GPT-2), torch.nn.LayerNorm semantics (biased variance).
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = (x − mean) / sqrt(var + eps) · w + b over the last dim.  x [..., C] f32; w [C], b [C] f32 or bf16
// (bf16: inference only); b may be undefined (no bias) -> y [..., C] f32. Gradients for x, w and b.
Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps);

}  // namespace lathe
