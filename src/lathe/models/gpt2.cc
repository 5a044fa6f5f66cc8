// GPT-2: learned positions, LayerNorm with biases, plain GELU(tanh) MLP, biases everywhere, tied head.
// Its Conv1D weights are stored [in, out]; they are transposed at load (exact) and back at save.
#include <cmath>

#include "lathe/base/checked_size.h"
#include "lathe/base/error.h"
#include "lathe/models/family.h"

namespace lathe {
using nlohmann::json;
namespace {

void parse_gpt2(const json& hf, ModelConfig& c) {
  c.keys = ConfigKeys{.vocab_size = "vocab_size",
                      .hidden = "n_embd",
                      .n_layers = "n_layer",
                      .n_heads = "n_head",
                      .n_kv_heads = "n_head",
                      .head_dim = "n_embd / n_head",
                      .ffn = "n_inner",
                      .max_positions = "n_positions",
                      .norm_eps = "layer_norm_epsilon"};
  c.vocab_size = hf_int(hf, "vocab_size");
  c.hidden = hf_int(hf, "n_embd");
  c.n_layers = hf_int(hf, "n_layer");
  c.n_heads = hf_int(hf, "n_head");
  c.n_kv_heads = c.n_heads;
  c.head_dim = 0;  // n_embd / n_head, once validated
  c.ffn = hf_int_or(hf, "n_inner", saturating_mul(4, c.hidden));
  c.max_positions = hf_int(hf, "n_positions");
  c.norm = NormKind::kLayer;
  c.norm_eps = hf_f32_or(hf, "layer_norm_epsilon", 1e-5);
  c.act = parse_activation(hf_string_or(hf, "activation_function", "gelu_new"));
  c.qkv_bias = c.out_bias = c.mlp_bias = true;
  c.learned_positions = true;
  c.tie_embeddings = true;
  LATHE_CHECK_ARG(!hf_bool_or(hf, "scale_attn_by_inverse_layer_idx", false) && !hf_bool_or(hf, "reorder_and_upcast_attn", false),
                  "config.json: GPT-2 options scale_attn_by_inverse_layer_idx / reorder_and_upcast_attn are not supported");
  c.attn_scale = hf_bool_or(hf, "scale_attn_weights", true) ? 0.f : 1.f;  // 0: 1/sqrt(D) once D is known
  c.bos_token_id = checked_size<int>(hf_int_or(hf, "bos_token_id", -1), "config.json: 'bos_token_id'", -1);
  c.eos_token_ids = hf_token_ids(hf, "eos_token_id");
  c.mlp = MlpKind::kPlain;
}

std::vector<TensorBinding> bindings_gpt2(const ModelConfig& c, ModelWeights& w) {
  std::vector<TensorBinding> out;
  const int64_t C = c.hidden;
  out.push_back(bind("transformer.wte.weight", w.embed, {c.vocab_size, C}));
  out.push_back(bind("transformer.wpe.weight", w.pos_embed, {c.max_positions, C}));
  for (int i = 0; i < c.n_layers; ++i) {
    LayerWeights& lw = w.layers[i];
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    out.push_back(bind(p + "ln_1.weight", lw.attn_norm_w, {C}));
    out.push_back(bind(p + "ln_1.bias", lw.attn_norm_b, {C}));
    out.push_back(bind_concat(p + "attn.c_attn.weight", {&lw.wq, &lw.wk, &lw.wv}, {{C, C}, {C, C}, {C, C}}, true));
    out.push_back(bind_concat(p + "attn.c_attn.bias", {&lw.bq, &lw.bk, &lw.bv}, {{C}, {C}, {C}}, false));
    out.push_back(bind_transposed(p + "attn.c_proj.weight", lw.wo, {C, C}));
    out.push_back(bind(p + "attn.c_proj.bias", lw.bo, {C}));
    out.push_back(bind(p + "ln_2.weight", lw.mlp_norm_w, {C}));
    out.push_back(bind(p + "ln_2.bias", lw.mlp_norm_b, {C}));
    out.push_back(bind_transposed(p + "mlp.c_fc.weight", lw.w_up, {c.ffn, C}));
    out.push_back(bind(p + "mlp.c_fc.bias", lw.b_up, {c.ffn}));
    out.push_back(bind_transposed(p + "mlp.c_proj.weight", lw.w_down, {C, c.ffn}));
    out.push_back(bind(p + "mlp.c_proj.bias", lw.b_down, {C}));
  }
  out.push_back(bind("transformer.ln_f.weight", w.final_norm_w, {C}));
  out.push_back(bind("transformer.ln_f.bias", w.final_norm_b, {C}));
  return out;
}

}  // namespace

extern const Family kGpt2Family{"gpt2", {"GPT2LMHeadModel"}, {"gpt2"}, parse_gpt2, bindings_gpt2};

}  // namespace lathe
