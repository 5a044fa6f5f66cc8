// A LoRA adapter on one Linear (specs/posttrain.md §3.1, PEFT's layout and maths):
//   y = x·Wᵀ + b + scaling · (dropout(x)·Aᵀ)·Bᵀ,  scaling = alpha / R (LoRA) or alpha / sqrt(R) (rsLoRA).
// linear() (nn/linear.h) applies it; models/lora_adapters.h attaches adapters to a model's Linears, reads
// and writes PEFT folders.
#pragma once

#include <cstdint>

#include "lathe/nn/forward_options.h"
#include "lathe/ops/linear.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

struct LoraAdapter {
  Tensor a;             // [R, in] f32 (PEFT lora_A.weight); the parts of a fused module share one A (GPT-2 c_attn)
  Tensor b;             // [out, R] f32 (PEFT lora_B.weight); a fused module's part holds its rows of B
  float scaling = 0.f;  // alpha / R, or alpha / sqrt(R) (rsLoRA)
  float dropout = 0.f;  // probability on the adapter's input, in training forwards (ForwardOptions::lora_dropout)
  // The dropout mask's stream: derive_key(ForwardOptions::dropout_key, dropout_stream). The parts of a
  // fused module share it, so they see one mask, as PEFT's single fused adapter does.
  uint64_t dropout_stream = 0;

  bool defined() const { return a.defined(); }
};

// The adapter's term: x [..., in] (f32, or bf16 as linear_input rounded it for a bf16 copy) ->
// scaling · (dropout(x)·Aᵀ)·Bᵀ [..., out] f32. Gradients reach A and B (and x) when they require grad.
// In bf16 compute x·Aᵀ multiplies bf16 x by A rounded to bf16 (f32 sums, f32 gradient to A); the rank-R
// product with B stays f32.
Tensor lora_delta(const Tensor& x, const LoraAdapter& l, const ForwardOptions& o);

// The same term in the form linear() adds into its output in one op (ops/linear.h): its input is x itself
// (or dropout(x) in a training forward with dropout), A rounded to bf16 when x is bf16.
LowRankTerm lora_term(const Tensor& x, const LoraAdapter& l, const ForwardOptions& o);

}  // namespace lathe
