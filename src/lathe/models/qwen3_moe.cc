// Qwen3-MoE: Qwen3 attention (q/k norms) with sparse expert MLPs. Reads both the hub layout (one tensor
// per expert: mlp.experts.<e>.{gate,up,down}_proj.weight) and transformers 5's fused 3-D layout
// (mlp.experts.gate_up_proj [E, 2F, C], mlp.experts.down_proj [E, C, F]); saves in the layout it read.
#include "lathe/base/error.h"
#include "lathe/models/family.h"

namespace lathe {
using nlohmann::json;
namespace {

void parse_qwen3_moe(const json& hf, ModelConfig& c) {
  parse_llama_like(hf, c);
  c.qk_norm = true;
  c.n_experts = hf_int(hf, "num_experts");
  c.top_k = hf_int(hf, "num_experts_per_tok");
  c.moe_ffn = hf_int(hf, "moe_intermediate_size");
  c.norm_topk_prob = hf_bool_or(hf, "norm_topk_prob", false);
  c.decoder_sparse_step = hf_int_or(hf, "decoder_sparse_step", 1);
  c.mlp_only_layers = hf_int_list_or_empty(hf, "mlp_only_layers");
}

// transformers 5 writes the fused layout; hub checkpoints one tensor per expert.
void read_layout_qwen3_moe(const CheckpointReader& ckpt, ModelConfig& c) {
  c.fused_experts = ckpt.contains("model.layers.0.mlp.experts.gate_up_proj");
}

std::vector<TensorBinding> bindings_qwen3_moe(const ModelConfig& c, ModelWeights& w) {
  std::vector<TensorBinding> out;
  bind_llama_common(c, w, out);
  constexpr ParamRole kX = ParamRole::kExpert;
  for (int i = 0; i < c.n_layers; ++i) {
    DecoderLayer& l = w.layers[i];
    const std::string p = layer_prefix(i);
    bind_llama_attention(c, w, i, out);
    out.push_back(bind(p + "post_attention_layernorm.weight", l.pre_feedforward_layernorm.weight, {c.hidden},
                       ParamRole::kNormWeight, i));
    if (c.layers[i].mlp != MlpKind::kMoe) {
      bind_gated_mlp(c, w, i, out);
      continue;
    }
    Experts& x = l.moe.experts;
    out.push_back(bind(p + "mlp.gate.weight", l.moe.router, {c.n_experts, c.hidden}, ParamRole::kRouter, i));
    if (c.fused_experts) {
      out.push_back(bind_concat_dim1(p + "mlp.experts.gate_up_proj", x.gate_proj, x.up_proj,
                                     {c.n_experts, c.moe_ffn, c.hidden}, kX, i));
      out.push_back(bind(p + "mlp.experts.down_proj", x.down_proj, {c.n_experts, c.hidden, c.moe_ffn}, kX, i));
      continue;
    }
    for (int e = 0; e < c.n_experts; ++e) {
      const std::string ep = p + "mlp.experts." + std::to_string(e) + ".";
      out.push_back(bind_stacked(ep + "gate_proj.weight", x.gate_proj, e, c.n_experts, {c.moe_ffn, c.hidden}, kX, i));
      out.push_back(bind_stacked(ep + "up_proj.weight", x.up_proj, e, c.n_experts, {c.moe_ffn, c.hidden}, kX, i));
      out.push_back(bind_stacked(ep + "down_proj.weight", x.down_proj, e, c.n_experts, {c.hidden, c.moe_ffn}, kX, i));
    }
  }
  return out;
}

}  // namespace

extern const Family kQwen3MoeFamily{"qwen3_moe",         {"Qwen3MoeForCausalLM"}, {"qwen3_moe"}, parse_qwen3_moe,
                                    bindings_qwen3_moe, read_layout_qwen3_moe};

}  // namespace lathe
