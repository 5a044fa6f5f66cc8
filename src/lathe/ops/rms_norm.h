// RMSNorm over the last dimension (Llama, Qwen, Mistral; Gemma's (1 + w) form via weight_offset = 1).
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = x / sqrt(mean(x², -1) + eps) · (weight_offset + w).  x [..., C] f32; w [C] f32 or bf16 (bf16:
// inference only) -> y [..., C] f32. weight_offset = 1 is Gemma's norm: w stays as stored (the checkpoint
// round-trips bit for bit) and the 1 is added inside the kernel, in f32 as HF does.
// The mean of squares is accumulated in f32, as HF's x.pow(2).mean(-1) in float32.
// Gradients for x and w.
Tensor rms_norm(const Tensor& x, const Tensor& w, float eps, float weight_offset = 0.f);

}  // namespace lathe
