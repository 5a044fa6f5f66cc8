// Linear: a weight with its optional bias, LoRA adapter and the formats it may be applied in. linear(x, l, o)
// is the one place where a weight's format (f32, bf16 compute copy, or a quantised format: int8 / int4 / nf4), its
// bias and its LoRA adapter are applied: the decoder never reads a Linear's tensors itself.
#pragma once

#include <utility>
#include <vector>

#include "lathe/nn/forward_options.h"
#include "lathe/nn/lora.h"
#include "lathe/tensor/quant_weight.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

struct Linear {
  Tensor weight;  // [out, in] f32 or bf16 (a loaded inference model may keep bf16 in place); undefined if quantised
  Tensor bias;    // [out] f32, or undefined
  Tensor bf16;    // [out, in] bf16 compute copy of an f32 weight (Model::make_bf16_copies), or undefined
  LoraAdapter lora;  // A [R, in], B [out, R] (models/lora_adapters.h), or undefined (no adapter)
  // Served adapters (multi-LoRA serving, inference only): slot s >= 1 holds adapter s's A and B for this
  // Linear, or nothing when that adapter does not adapt it; slot 0 (the base) is always empty. Applied to
  // the rows ForwardOptions::lora_rows gives each slot, on top of `lora` (which applies to every row).
  std::vector<LoraAdapter> lora_slots;
  // The weight in a quantised format (tensor/quant_weight.h; a quantised checkpoint, `lathe quantize`, or
  // a QLoRA base quantised at load), frozen, or undefined. A Linear holds either `weight` or `quant`.
  QuantWeight quant;
};

// The weight a matmul reads: in bf16 compute (o.bf16) the bf16 copy, as bf16_compute_weight (gradients
// reach the f32 master), else the weight itself; a quantised weight dequantised to f32 [out, in] (O(out·in)
// per call: for the fused loss heads of a quantised LM head, not for decoding).
Tensor linear_weight(const Linear& l, const ForwardOptions& o = {});
// x as l's matmul reads it: rounded to bf16 when it multiplies a bf16 copy (and not bf16 already).
// Round once and pass the result to several linears of one input, as the attention block does.
Tensor linear_input(const Tensor& x, const Linear& l, const ForwardOptions& o = {});

// y = x · Wᵀ + b (+ scaling · (dropout(x)·Aᵀ)·Bᵀ with an adapter and o.lora).  x [..., in] -> y [..., out] f32.
// A quantised weight runs ops/quant_linear.h's kernels on f32 x; its adapter (QLoRA) adds its term in f32,
// and gradients reach x, the adapter and the bias, never the quantised weight.
// Without an adapter (or with o.lora off) exactly the plain linear: same code, same results.
// With o.lora_rows, x must be [N, in] and each run's rows add their slot's term (a slice of rows -> two
// small GEMMs -> added in place); served adapters record no gradient (InvalidArgument when y would need one).
Tensor linear(const Tensor& x, const Linear& l, const ForwardOptions& o = {});
// {linear(x, a, o), linear(x, b, o)} for two Linears of one input with equal shapes (k and v, gate and
// up): ops/linear.h's linear_pair, so the two GEMMs may run side by side.
std::pair<Tensor, Tensor> linear_pair(const Tensor& x, const Linear& a, const Linear& b, const ForwardOptions& o = {});

}  // namespace lathe
