// Point-wise activations of the MLP blocks: SiLU (Llama, Qwen, Mistral), exact GELU (GPT-2's "gelu"
// configs, BERT) and the tanh-approximated GELU (GPT-2 "gelu_new", Gemma "gelu_pytorch_tanh").
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/tensor/tensor.h"

namespace lathe {

enum class Activation : uint8_t { kSilu, kGelu, kGeluTanh, kCount };

// HF config names ("hidden_act" / "hidden_activation"): "silu" and "swish" -> kSilu; "gelu" -> kGelu;
// "gelu_new", "gelu_pytorch_tanh", "gelu_fast" -> kGeluTanh (one function, three spellings). Anything else
// (e.g. "quick_gelu", "relu") -> InvalidArgument naming it.
Activation parse_activation(std::string_view hf_name);
std::string_view activation_name(Activation kind);  // "silu", "gelu", "gelu_tanh"

// y = act(x).  x [...] f32 -> y [...]. Gradient for x.
Tensor activation(const Tensor& x, Activation kind);
inline Tensor silu(const Tensor& x) { return activation(x, Activation::kSilu); }
inline Tensor gelu(const Tensor& x) { return activation(x, Activation::kGelu); }
inline Tensor gelu_tanh(const Tensor& x) { return activation(x, Activation::kGeluTanh); }

// Kernel entry points shared with gated_activation: n contiguous f32 elements, inputs already validated.
// y = act(x) ⊙ m (m null: y = act(x)).
void activation_forward(Activation kind, const float* x, const float* m, float* y, int64_t n);
// dx = g ⊙ m ⊙ act'(x) (m null: dx = g ⊙ act'(x)); when dm is not null also dm = g ⊙ act(x). Written.
void activation_backward(Activation kind, const float* x, const float* m, const float* g, float* dx, float* dm,
                         int64_t n);

}  // namespace lathe
