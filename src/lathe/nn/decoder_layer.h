// One decoder layer's parameters. The norm members carry Gemma's Hugging Face names, the only family
// that has all four; Llama-style families call the pre-MLP norm `post_attention_layernorm` (their family
// files bind it to pre_feedforward_layernorm), GPT-2 calls them ln_1 / ln_2.
#pragma once

#include "lathe/nn/attention.h"
#include "lathe/nn/mlp.h"
#include "lathe/nn/norm.h"

namespace lathe {

struct DecoderLayer {
  Norm input_layernorm;             // [C] before attention
  Attention self_attn;
  Norm post_attention_layernorm;    // [C] on the attention output (Gemma 2/3 sandwich norms), else undefined
  Norm pre_feedforward_layernorm;   // [C] before the MLP
  Mlp mlp;                          // dense layers (undefined in MoE layers)
  Moe moe;                          // MoE layers (MlpKind::kMoe), else undefined
  Norm post_feedforward_layernorm;  // [C] on the MLP output (Gemma 2/3), else undefined
};

}  // namespace lathe
