// Gated MLP pieces (SwiGLU: Llama, Qwen, Mistral; GeGLU: Gemma): the fused act(gate) ⊙ up, and the whole
// block composed from linear for callers that do not need the intermediates.
#pragma once

#include "lathe/ops/activation.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// y = act(gate) ⊙ up, in one pass (act(gate) is never stored).  gate, up [..., F] f32, same shape ->
// y [..., F]. Gradients: dgate = g ⊙ up ⊙ act'(gate), dup = g ⊙ act(gate), recomputed from gate.
Tensor gated_activation(const Tensor& gate, const Tensor& up, Activation kind);

// down(act(x·w_gateᵀ) ⊙ x·w_upᵀ), the HF LlamaMLP / GemmaMLP forward.  x [..., C] f32; w_gate, w_up
// [F, C]; w_down [C, F] (f32, or bf16 for inference) -> [..., C]. Differentiable through the parts.
Tensor gated_mlp(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, Activation kind);

}  // namespace lathe
