// Quantised weights as an op: quantise and dequantise a weight (tensor/quant_weight.h, the rules of
// ref/quant.h), and the linear y = x · deq(W)ᵀ + b that nn::Linear runs for a quantised weight.
#pragma once

#include "lathe/tensor/quant_weight.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// w [out, in] f32, bf16 or f16 -> its codes, scales and mins in `spec`'s format. InvalidArgument when in is
// not a multiple of the group size (the format has no partial group), naming the shape and the format.
QuantWeight quantize_weight(const Tensor& w, const QuantSpec& spec);
// -> [out, in] f32, each weight as every kernel dequantises it. O(out · in): explicit on purpose.
Tensor dequantize_weight(const QuantWeight& w);

// y = x · deq(w)ᵀ + b.  x [..., in] f32 (bf16 is widened); b [out] f32 or undefined -> y [..., out] f32.
// Inference only: NotImplemented when a gradient would be needed (training on a quantised base, QLoRA,
// is a later part of issue 15).
Tensor linear(const Tensor& x, const QuantWeight& w, const Tensor& b = Tensor());

}  // namespace lathe
