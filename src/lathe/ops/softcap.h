// Logit soft-capping, cap·tanh(x / cap): Gemma 2's attention scores (cap 50) and final logits (cap 30).
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = cap · tanh(x / cap).  x [...] f32, cap > 0 -> y [...]. Gradient: dx = g · (1 − (y / cap)²).
Tensor softcap(const Tensor& x, float cap);

// Kernel entry point shared with linear_cross_entropy: y[i] = cap · tanh(x[i] / cap) over n contiguous
// f32 (in place allowed), single-threaded (callers parallelise over rows).
void softcap_forward(const float* x, float* y, int64_t n, float cap);

}  // namespace lathe
