// Llama, Mistral, Qwen2 and Qwen3: pre-norm RMSNorm decoders with SwiGLU MLPs and rotary attention.
// They differ only in config: q/k/v biases (Qwen2), q/k RMSNorm (Qwen3), sliding window (Mistral).
#include <cmath>

#include "lathe/base/checked_size.h"
#include "lathe/base/error.h"
#include "lathe/models/family.h"

namespace lathe {
using nlohmann::json;

std::string layer_prefix(int layer) { return "model.layers." + std::to_string(layer) + "."; }

void parse_llama_like(const json& hf, ModelConfig& c) {
  c.vocab_size = hf_int(hf, "vocab_size");
  c.hidden = hf_int(hf, "hidden_size");
  c.n_layers = hf_int(hf, "num_hidden_layers");
  c.n_heads = hf_int(hf, "num_attention_heads");
  c.n_kv_heads = hf_int_or(hf, "num_key_value_heads", c.n_heads);
  c.head_dim = hf_int_or(hf, "head_dim", 0);  // 0 (as in transformers, also when given as 0): hidden / heads
  c.ffn = hf_int_or(hf, "intermediate_size", saturating_mul(4, c.hidden));
  c.max_positions = hf_int_or(hf, "max_position_embeddings", 4096);
  c.norm_eps = hf_f32_or(hf, "rms_norm_eps", 1e-6);
  c.act = parse_activation(hf_string_or(hf, "hidden_act", hf_string_or(hf, "hidden_activation", "silu")));
  c.qkv_bias = hf_bool_or(hf, "attention_bias", false);
  c.out_bias = c.qkv_bias;
  c.mlp_bias = hf_bool_or(hf, "mlp_bias", false);
  c.tie_embeddings = hf_bool_or(hf, "tie_word_embeddings", false);
  c.bos_token_id = checked_size<int>(hf_int_or(hf, "bos_token_id", -1), "config.json: 'bos_token_id'", -1);
  c.pad_token_id = checked_size<int>(hf_int_or(hf, "pad_token_id", -1), "config.json: 'pad_token_id'", -1);
  c.eos_token_ids = hf_token_ids(hf, "eos_token_id");
  // transformers 5 writes rope_parameters; 4.x writes rope_theta + rope_scaling. A keyed-by-layer-type
  // form (transformers 5 with layer_types) gives the full and sliding layers their own settings.
  const json rp = hf_rope_params(hf);
  if (rp.contains("full_attention") || rp.contains("sliding_attention")) {
    c.rope = rope_from_hf(hf, hf_object_or_null(rp, "full_attention", "rope_parameters.full_attention"), 10000.f);
    c.local_rope = c.rope;
    if (rp.contains("sliding_attention"))
      c.local_rope = rope_from_hf(hf, hf_object_or_null(rp, "sliding_attention", "rope_parameters.sliding_attention"), 10000.f);
  } else {
    c.rope = c.local_rope = rope_from_hf(hf, rp, 10000.f);
  }
  c.partial_rotary_factor = hf_float_or(hf, "partial_rotary_factor", 1.0);
  // Sliding window: Qwen2/3 only with use_sliding_window (Mistral's default differs: parse_mistral).
  if (hf_bool_or(hf, "use_sliding_window", false)) c.sliding_window = hf_int_or(hf, "sliding_window", 0);
}

void bind_llama_common(const ModelConfig& c, ModelWeights& w, std::vector<TensorBinding>& out) {
  out.push_back(bind("model.embed_tokens.weight", w.embed_tokens.weight, {c.vocab_size, c.hidden}, ParamRole::kEmbedding));
  out.push_back(bind("model.norm.weight", w.norm.weight, {c.hidden}, ParamRole::kNormWeight));
  if (!c.tie_embeddings)
    out.push_back(bind("lm_head.weight", w.lm_head.weight, {c.vocab_size, c.hidden}, ParamRole::kMatmulWeight));
}

void bind_llama_attention(const ModelConfig& c, ModelWeights& w, int i, std::vector<TensorBinding>& out) {
  Attention& a = w.layers[i].self_attn;
  const std::string p = layer_prefix(i) + "self_attn.";
  constexpr ParamRole kW = ParamRole::kMatmulWeight, kB = ParamRole::kBias, kN = ParamRole::kNormWeight;
  out.push_back(bind(layer_prefix(i) + "input_layernorm.weight", w.layers[i].input_layernorm.weight, {c.hidden}, kN, i));
  out.push_back(bind(p + "q_proj.weight", a.q_proj.weight, {c.q_dim(), c.hidden}, kW, i));
  out.push_back(bind(p + "k_proj.weight", a.k_proj.weight, {c.kv_dim(), c.hidden}, kW, i));
  out.push_back(bind(p + "v_proj.weight", a.v_proj.weight, {c.kv_dim(), c.hidden}, kW, i));
  out.push_back(bind(p + "o_proj.weight", a.o_proj.weight, {c.hidden, c.q_dim()}, kW, i));
  if (c.qkv_bias) {
    out.push_back(bind(p + "q_proj.bias", a.q_proj.bias, {c.q_dim()}, kB, i));
    out.push_back(bind(p + "k_proj.bias", a.k_proj.bias, {c.kv_dim()}, kB, i));
    out.push_back(bind(p + "v_proj.bias", a.v_proj.bias, {c.kv_dim()}, kB, i));
  }
  if (c.out_bias) out.push_back(bind(p + "o_proj.bias", a.o_proj.bias, {c.hidden}, kB, i));
  if (c.qk_norm) {
    out.push_back(bind(p + "q_norm.weight", a.q_norm.weight, {c.head_dim}, kN, i));
    out.push_back(bind(p + "k_norm.weight", a.k_norm.weight, {c.head_dim}, kN, i));
  }
}

void bind_gated_mlp(const ModelConfig& c, ModelWeights& w, int i, std::vector<TensorBinding>& out) {
  Mlp& m = w.layers[i].mlp;
  const std::string p = layer_prefix(i) + "mlp.";
  constexpr ParamRole kW = ParamRole::kMatmulWeight;
  out.push_back(bind(p + "gate_proj.weight", m.gate_proj.weight, {c.ffn, c.hidden}, kW, i));
  out.push_back(bind(p + "up_proj.weight", m.up_proj.weight, {c.ffn, c.hidden}, kW, i));
  out.push_back(bind(p + "down_proj.weight", m.down_proj.weight, {c.hidden, c.ffn}, kW, i));
}

namespace {

void parse_llama(const json& hf, ModelConfig& c) { parse_llama_like(hf, c); }

void parse_mistral(const json& hf, ModelConfig& c) {
  parse_llama_like(hf, c);
  // Mistral applies its sliding window to every layer unless use_sliding_window says otherwise.
  if (hf_bool_or(hf, "use_sliding_window", true)) c.sliding_window = hf_int_or(hf, "sliding_window", 0);
}

void parse_qwen2(const json& hf, ModelConfig& c) {
  parse_llama_like(hf, c);
  c.qkv_bias = true;  // Qwen2 always has q/k/v biases and none on o_proj
  c.out_bias = false;
}

void parse_qwen3(const json& hf, ModelConfig& c) {
  parse_llama_like(hf, c);
  c.qk_norm = true;
}

std::vector<TensorBinding> bindings_llama(const ModelConfig& c, ModelWeights& w) {
  std::vector<TensorBinding> out;
  bind_llama_common(c, w, out);
  for (int i = 0; i < c.n_layers; ++i) {
    bind_llama_attention(c, w, i, out);
    // Llama's post_attention_layernorm is the norm before the MLP.
    out.push_back(bind(layer_prefix(i) + "post_attention_layernorm.weight", w.layers[i].pre_feedforward_layernorm.weight,
                       {c.hidden}, ParamRole::kNormWeight, i));
    bind_gated_mlp(c, w, i, out);
  }
  return out;
}

}  // namespace

extern const Family kLlamaFamily{"llama", {"LlamaForCausalLM"}, {"llama"}, parse_llama, bindings_llama};
extern const Family kMistralFamily{"mistral", {"MistralForCausalLM"}, {"mistral"}, parse_mistral, bindings_llama};
extern const Family kQwen2Family{"qwen2", {"Qwen2ForCausalLM"}, {"qwen2"}, parse_qwen2, bindings_llama};
extern const Family kQwen3Family{"qwen3", {"Qwen3ForCausalLM"}, {"qwen3"}, parse_qwen3, bindings_llama};

}  // namespace lathe
