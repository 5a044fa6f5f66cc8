// Rotary position embeddings (RoFormer) in the Hugging Face "rotate_half" layout: within the first R
// (rotary_dim) dims of each head, dim i is rotated together with dim i + R/2 (GPT-NeoX style, not the
// GPT-J interleave); dims R..D-1 pass through. Angles and cos/sin are rounded as transformers does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe {

// transformers' rope_type: "default", "linear", "llama3" (modeling_rope_utils.py).
enum class RopeScaling : uint8_t { kNone, kLinear, kLlama3, kCount };

struct RopeConfig {
  float theta = 10000.f;  // rope_theta; a per-layer base (Gemma local/global) is one config per layer
  int rotary_dim = 0;     // R: rotated dims per head, even; head_dim, or head_dim·partial_rotary_factor
  RopeScaling scaling = RopeScaling::kNone;
  float factor = 1.f;             // linear and llama3
  float low_freq_factor = 1.f;    // llama3
  float high_freq_factor = 4.f;   // llama3
  int original_max_position = 8192;  // llama3: original_max_position_embeddings
};

// inv_freq [R/2]: 1 / theta^(2i/R) in f32 as torch computes it, then the scaling rule
// (linear: / factor; llama3: _compute_llama3_parameters, evaluated in the same f32 order).
std::vector<float> rope_inv_freq(const RopeConfig& cfg);

// x [B, T, H, D] f32, positions i32 [T] (shared by the batch) or [B, T], inv_freq [R/2] with R <= D
// -> [B, T, H, D]. Angle = f32(position · inv_freq[i]); out_i = x_i·cos − x_{i+R/2}·sin,
// out_{i+R/2} = x_{i+R/2}·cos + x_i·sin. Differentiable in x (the gradient is the inverse rotation).
Tensor rope(const Tensor& x, const Tensor& positions, std::span<const float> inv_freq);

// Decode path, no autograd, no allocation: rotates one token's heads in place.
// x [n_heads, head_dim] contiguous; inv_freq [R/2] with R <= head_dim.
void rope_inplace(float* x, int n_heads, int head_dim, int64_t position, std::span<const float> inv_freq);

}  // namespace lathe
