// Element-wise arithmetic on f32 tensors of one shape (no broadcasting): residual adds, gating products
// and constant scaling (embedding normalisers, loss weights).
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = a + b.  a, b [...] f32, same shape -> y [...].
Tensor add(const Tensor& a, const Tensor& b);

// y = a ⊙ b.  a, b [...] f32, same shape -> y [...].
Tensor mul(const Tensor& a, const Tensor& b);

// y = x · s.  x [...] f32 -> y [...].
Tensor scale(const Tensor& x, float s);

}  // namespace lathe
