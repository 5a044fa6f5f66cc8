// Gemma 2 and Gemma 3 (text): Llama-style blocks plus sandwich norms, (1 + w) RMSNorm, scaled
// embeddings, GeGLU, query_pre_attn_scalar, alternating sliding-window / global layers, and (Gemma 2)
// attention and final-logit soft-capping, or (Gemma 3) q/k norms and a separate local RoPE base.
#include "lathe/base/error.h"
#include "lathe/models/family.h"

namespace lathe {
using nlohmann::json;
namespace {

// gemma3: q/k norms, every sliding_window_pattern-th layer global, a local RoPE base of its own.
void parse_gemma(const json& hf, ModelConfig& c, bool gemma3) {
  parse_llama_like(hf, c);
  c.act = parse_activation(hf_string_or(hf, "hidden_activation", hf_string_or(hf, "hidden_act", "gelu_pytorch_tanh")));
  c.norm_weight_offset = 1.f;
  c.sandwich_norms = true;
  c.tie_embeddings = hf_bool_or(hf, "tie_word_embeddings", true);
  c.qk_norm = gemma3;
  c.scale_embeddings = true;  // by sqrt(C), derived once hidden_size is validated
  if (hf.contains("query_pre_attn_scalar") && !hf["query_pre_attn_scalar"].is_null())
    c.query_pre_attn_scalar = hf_float_or(hf, "query_pre_attn_scalar", 0.0);
  c.attn_softcap = hf_f32_or(hf, "attn_logit_softcapping", 0.0);
  c.final_softcap = hf_f32_or(hf, "final_logit_softcapping", 0.0);
  c.sliding_window = hf_int_or(hf, "sliding_window", 4096);
  // transformers 5 lists layer_types; 4.x gives sliding_window_pattern (Gemma 3: every Nth layer global)
  // or, for Gemma 2, alternates starting with a sliding layer.
  c.layer_types = hf_string_list_or_empty(hf, "layer_types");
  c.sliding_window_pattern = gemma3 ? hf_int_or(hf, "sliding_window_pattern", 6) : 2;
  // Rotary: Gemma 3 local layers use rope_local_base_freq with no scaling; global layers rope_theta with
  // rope_scaling. transformers 5 keys rope_parameters by layer type instead.
  const json rp = hf_rope_params(hf);  // an object or null, else an error naming the key
  if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
    c.rope = rope_from_hf(hf, hf_object_or_null(rp, "full_attention", "rope_parameters.full_attention"), 1e6f);
    c.local_rope = rope_from_hf(hf, hf_object_or_null(rp, "sliding_attention", "rope_parameters.sliding_attention"), 1e4f);
  } else {
    c.rope = rope_from_hf(hf, rp, 10000.f);
    c.local_rope = c.rope;
    if (gemma3)
      c.local_rope = rope_from_hf(json::object(), json(), hf_f32_or(hf, "rope_local_base_freq", 10000.0));
  }
}

void parse_gemma2(const json& hf, ModelConfig& c) { parse_gemma(hf, c, false); }
void parse_gemma3(const json& hf, ModelConfig& c) { parse_gemma(hf, c, true); }

std::vector<TensorBinding> bindings_gemma(const ModelConfig& c, ModelWeights& w) {
  std::vector<TensorBinding> out;
  bind_llama_common(c, w, out);
  for (int i = 0; i < c.n_layers; ++i) {
    DecoderLayer& l = w.layers[i];
    const std::string p = layer_prefix(i);
    constexpr ParamRole kN = ParamRole::kNormWeight;
    bind_llama_attention(c, w, i, out);
    out.push_back(bind(p + "post_attention_layernorm.weight", l.post_attention_layernorm.weight, {c.hidden}, kN, i));
    out.push_back(bind(p + "pre_feedforward_layernorm.weight", l.pre_feedforward_layernorm.weight, {c.hidden}, kN, i));
    out.push_back(bind(p + "post_feedforward_layernorm.weight", l.post_feedforward_layernorm.weight, {c.hidden}, kN, i));
    bind_gated_mlp(c, w, i, out);
  }
  return out;
}

}  // namespace

extern const Family kGemma2Family{"gemma2", {"Gemma2ForCausalLM"}, {"gemma2"}, parse_gemma2, bindings_gemma};
extern const Family kGemma3Family{"gemma3", {"Gemma3ForCausalLM"}, {"gemma3_text"}, parse_gemma3, bindings_gemma};

}  // namespace lathe
