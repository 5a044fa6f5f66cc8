// Differentiable reshape: Tensor::view without autograd is for kernels; this records the inverse view.
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// x [...] -> same elements as `shape` (one dim may be -1). Copies only when x is not contiguous.
Tensor reshape(const Tensor& x, const Shape& shape);

}  // namespace lathe
