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
  // Sliding window: Mistral applies it to every layer; Qwen2/3 only with use_sliding_window.
  if (hf_bool_or(hf, "use_sliding_window", c.family == "mistral")) c.sliding_window = hf_int_or(hf, "sliding_window", 0);
}

void bind_llama_common(const ModelConfig& c, ModelWeights& w, std::vector<TensorBinding>& out) {
  out.push_back(bind("model.embed_tokens.weight", w.embed, {c.vocab_size, c.hidden}));
  out.push_back(bind("model.norm.weight", w.final_norm_w, {c.hidden}));
  if (!c.tie_embeddings) out.push_back(bind("lm_head.weight", w.lm_head, {c.vocab_size, c.hidden}));
}

void bind_llama_attention(const ModelConfig& c, ModelWeights& w, int i, std::vector<TensorBinding>& out) {
  LayerWeights& lw = w.layers[i];
  const std::string p = layer_prefix(i) + "self_attn.";
  out.push_back(bind(layer_prefix(i) + "input_layernorm.weight", lw.attn_norm_w, {c.hidden}));
  out.push_back(bind(p + "q_proj.weight", lw.wq, {c.q_dim(), c.hidden}));
  out.push_back(bind(p + "k_proj.weight", lw.wk, {c.kv_dim(), c.hidden}));
  out.push_back(bind(p + "v_proj.weight", lw.wv, {c.kv_dim(), c.hidden}));
  out.push_back(bind(p + "o_proj.weight", lw.wo, {c.hidden, c.q_dim()}));
  if (c.qkv_bias) {
    out.push_back(bind(p + "q_proj.bias", lw.bq, {c.q_dim()}));
    out.push_back(bind(p + "k_proj.bias", lw.bk, {c.kv_dim()}));
    out.push_back(bind(p + "v_proj.bias", lw.bv, {c.kv_dim()}));
  }
  if (c.out_bias) out.push_back(bind(p + "o_proj.bias", lw.bo, {c.hidden}));
  if (c.qk_norm) {
    out.push_back(bind(p + "q_norm.weight", lw.q_norm, {c.head_dim}));
    out.push_back(bind(p + "k_norm.weight", lw.k_norm, {c.head_dim}));
  }
}

void bind_gated_mlp(const ModelConfig& c, LayerWeights& lw, const std::string& p, std::vector<TensorBinding>& out) {
  out.push_back(bind(p + "mlp.gate_proj.weight", lw.w_gate, {c.ffn, c.hidden}));
  out.push_back(bind(p + "mlp.up_proj.weight", lw.w_up, {c.ffn, c.hidden}));
  out.push_back(bind(p + "mlp.down_proj.weight", lw.w_down, {c.hidden, c.ffn}));
}

namespace {

void parse_llama(const json& hf, ModelConfig& c) {
  parse_llama_like(hf, c);
  c.qk_norm = c.family == "qwen3";
  if (c.family == "qwen2") {  // Qwen2 always has q/k/v biases and none on o_proj
    c.qkv_bias = true;
    c.out_bias = false;
  }
}

std::vector<TensorBinding> bindings_llama(const ModelConfig& c, ModelWeights& w) {
  std::vector<TensorBinding> out;
  bind_llama_common(c, w, out);
  for (int i = 0; i < c.n_layers; ++i) {
    bind_llama_attention(c, w, i, out);
    out.push_back(bind(layer_prefix(i) + "post_attention_layernorm.weight", w.layers[i].mlp_norm_w, {c.hidden}));
    bind_gated_mlp(c, w.layers[i], layer_prefix(i), out);
  }
  return out;
}

}  // namespace

extern const Family kLlamaFamily{"llama", {"LlamaForCausalLM"}, {"llama"}, parse_llama, bindings_llama};
extern const Family kMistralFamily{"mistral", {"MistralForCausalLM"}, {"mistral"}, parse_llama, bindings_llama};
extern const Family kQwen2Family{"qwen2", {"Qwen2ForCausalLM"}, {"qwen2"}, parse_llama, bindings_llama};
extern const Family kQwen3Family{"qwen3", {"Qwen3ForCausalLM"}, {"qwen3"}, parse_llama, bindings_llama};

}  // namespace lathe
