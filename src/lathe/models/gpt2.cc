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
  constexpr ParamRole kW = ParamRole::kMatmulWeight, kB = ParamRole::kBias, kN = ParamRole::kNormWeight,
                      kE = ParamRole::kEmbedding;
  // HF GPT2PreTrainedModel._init_weights: the residual projections (attn and mlp c_proj) draw with
  // std / sqrt(2 L), so the residual stream's variance does not grow with depth.
  const float residual_std =
      static_cast<float>(c.initializer_range) / std::sqrt(2.f * static_cast<float>(c.n_layers));
  out.push_back(bind("transformer.wte.weight", w.embed_tokens.weight, {c.vocab_size, C}, kE));
  out.push_back(bind("transformer.wpe.weight", w.embed_positions.weight, {c.max_positions, C}, kE));
  for (int i = 0; i < c.n_layers; ++i) {
    DecoderLayer& l = w.layers[i];
    Attention& a = l.self_attn;
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    out.push_back(bind(p + "ln_1.weight", l.input_layernorm.weight, {C}, kN, i));
    out.push_back(bind(p + "ln_1.bias", l.input_layernorm.bias, {C}, kB, i));
    out.push_back(bind_concat(p + "attn.c_attn.weight",
                              {{&a.q_proj.weight, &a.k_proj.weight, &a.v_proj.weight}, {{C, C}, {C, C}, {C, C}}, true},
                              kW, i));
    out.push_back(bind_concat(p + "attn.c_attn.bias", {{&a.q_proj.bias, &a.k_proj.bias, &a.v_proj.bias}, {{C}, {C}, {C}}},
                              kB, i));
    out.push_back(bind_transposed(p + "attn.c_proj.weight", a.o_proj.weight, {C, C}, kW, i));
    out.back().init_std = residual_std;
    out.push_back(bind(p + "attn.c_proj.bias", a.o_proj.bias, {C}, kB, i));
    out.push_back(bind(p + "ln_2.weight", l.pre_feedforward_layernorm.weight, {C}, kN, i));
    out.push_back(bind(p + "ln_2.bias", l.pre_feedforward_layernorm.bias, {C}, kB, i));
    out.push_back(bind_transposed(p + "mlp.c_fc.weight", l.mlp.up_proj.weight, {c.ffn, C}, kW, i));
    out.push_back(bind(p + "mlp.c_fc.bias", l.mlp.up_proj.bias, {c.ffn}, kB, i));
    out.push_back(bind_transposed(p + "mlp.c_proj.weight", l.mlp.down_proj.weight, {C, c.ffn}, kW, i));
    out.back().init_std = residual_std;
    out.push_back(bind(p + "mlp.c_proj.bias", l.mlp.down_proj.bias, {C}, kB, i));
  }
  out.push_back(bind("transformer.ln_f.weight", w.norm.weight, {C}, kN));
  out.push_back(bind("transformer.ln_f.bias", w.norm.bias, {C}, kB));
  return out;
}

}  // namespace

extern const Family kGpt2Family{"gpt2", {"GPT2LMHeadModel"}, {"gpt2"}, parse_gpt2, bindings_gpt2};

}  // namespace lathe
