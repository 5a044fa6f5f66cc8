// Linear layer and plain matmul: the GEMM-backed ops every block is built from.
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = x · wᵀ + b.  x [..., in] f32; w [out, in] f32 or bf16; b [out] or undefined -> y [..., out] f32.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// c = a · b (2-D).  a [M, K], b [K, N] f32 -> c [M, N].
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace lathe
