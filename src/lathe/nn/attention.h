// Self-attention parameters, named as in Hugging Face's Llama / Qwen / Gemma attention modules (GPT-2's
// fused c_attn is split into q/k/v_proj at load).
#pragma once

#include "lathe/nn/linear.h"
#include "lathe/nn/norm.h"

namespace lathe {

struct Attention {
  Linear q_proj;  // [H*D, C], bias [H*D] (Qwen2, GPT-2)
  Linear k_proj;  // [Hkv*D, C], bias [Hkv*D]
  Linear v_proj;  // [Hkv*D, C], bias [Hkv*D]
  Linear o_proj;  // [C, H*D], bias [C] (GPT-2)
  Norm q_norm;    // [D] per-head RMSNorm of q (Qwen3, Gemma 3), else undefined
  Norm k_norm;    // [D]
};

}  // namespace lathe
