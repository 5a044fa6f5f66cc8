// Quantised weights as an op: quantise and dequantise a weight (tensor/quant_weight.h, the rules of
// ref/quant.h), and the linear y = x · deq(W)ᵀ + b that nn::Linear runs for a quantised weight.
#pragma once

#include <string>

#include "lathe/ops/linear.h"
#include "lathe/tensor/quant_weight.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// w [out, in] f32, bf16 or f16 -> its codes, scales and mins in `spec`'s format. InvalidArgument when in is
// not a multiple of the group size (the format has no partial group), naming the shape and the format.
// nf4 takes any shape (bitsandbytes' blocks run over the flattened weight) and double-quantises the
// statistics (ref/nf4.h); its quant_state "dtype" is w's dtype.
QuantWeight quantize_weight(const Tensor& w, const QuantSpec& spec);
// An NF4 weight [out, in] from its stored parts (a bitsandbytes folder): codes [ceil(out·in / 2), 1] u8 and
// the statistics; the kernels' f32 block absmax is derived from them (dequantised when nested).
// InvalidArgument (prefixed with `where`) on a shape or dtype that does not fit.
QuantWeight nf4_weight(int64_t out, int64_t in, int64_t blocksize, Tensor codes, Nf4Stats stats,
                       const std::string& where);
// -> [out, in] f32, each weight as every kernel dequantises it. O(out · in): explicit on purpose.
Tensor dequantize_weight(const QuantWeight& w);

// y = x · deq(w)ᵀ + b.  x [..., in] f32 (bf16 is widened); b [out] f32 or undefined -> y [..., out] f32.
// The weight is frozen: gradients reach x (dx = dy · deq(w), a panel of W dequantised at a time: QLoRA's
// backward) and b, never w.
Tensor linear(const Tensor& x, const QuantWeight& w, const Tensor& b = Tensor());

// The same plus term.scaling · (term.x · term.aᵀ) · term.bᵀ in one op (a LoRA adapter on a quantised base:
// QLoRA; ops/linear.h's low-rank form): the rank-R product is added into y by a GEMM and, when term.x is x
// itself, its share of dx into the base's dx, so the adapter costs no [..., out] temporaries. All f32.
// Gradients reach x, b, term.x, term.a and term.b; never w.
Tensor linear(const Tensor& x, const QuantWeight& w, const Tensor& b, const LowRankTerm& term);

}  // namespace lathe
