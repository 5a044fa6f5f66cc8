// ModelConfig: the runtime description of a decoder, filled from a Hugging Face config.json by the
// family files. Every family is this one struct with different values (DESIGN.md "one decoder").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/ops/activation.h"
#include "lathe/ops/rope.h"

namespace lathe {

enum class NormKind : uint8_t { kRms, kLayer, kCount };
enum class MlpKind : uint8_t { kGated, kPlain, kMoe, kCount };  // act(gate)*up | act(fc) | sparse experts

struct LayerConfig {
  int window = 0;        // sliding-window size in tokens (0: full attention)
  RopeConfig rope;       // per layer: Gemma's local and global layers use different bases and scaling
  MlpKind mlp = MlpKind::kGated;
};

struct ModelConfig {
  std::string family;        // "llama", "qwen3_moe", "gemma3", ... (the family file's name)
  std::string architecture;  // HF class name, e.g. "LlamaForCausalLM"
  std::string model_type;    // config.json model_type as written

  int64_t vocab_size = 0;  // V
  int64_t hidden = 0;      // C
  int64_t n_layers = 0;    // L
  int64_t n_heads = 0;     // H
  int64_t n_kv_heads = 0;  // Hkv
  int64_t head_dim = 0;    // D
  int64_t ffn = 0;         // F (dense MLP width)
  int64_t max_positions = 0;

  NormKind norm = NormKind::kRms;
  float norm_eps = 1e-6f;
  float norm_weight_offset = 0.f;  // 1: Gemma's (1 + w) RMSNorm, kept as stored and folded in the kernel
  bool sandwich_norms = false;     // Gemma 2/3: extra norms after attention and after the MLP
  bool qk_norm = false;            // Qwen3 / Gemma 3: RMSNorm over D on q and k
  Activation act = Activation::kSilu;

  bool qkv_bias = false, out_bias = false, mlp_bias = false;
  bool learned_positions = false;  // GPT-2: wpe instead of rotary
  bool tie_embeddings = false;
  float embed_scale = 1.f;         // Gemma: sqrt(C), rounded to the activation dtype as HF does
  float attn_scale = 0.f;          // softmax scale (1/sqrt(D) unless the family says otherwise)
  float attn_softcap = 0.f;        // Gemma 2 (0: off)
  float final_softcap = 0.f;       // Gemma 2 final logits (0: off)

  // Mixture of experts (Qwen3-MoE).
  int64_t n_experts = 0;   // E
  int64_t top_k = 0;       // K
  int64_t moe_ffn = 0;     // expert MLP width
  bool norm_topk_prob = true;
  bool fused_experts = false;  // transformers-5 layout (experts.gate_up_proj / experts.down_proj)

  std::vector<LayerConfig> layers;
  std::vector<int> eos_token_ids;
  int bos_token_id = -1;
  int pad_token_id = -1;

  nlohmann::json hf_config;  // config.json as read, written back unchanged on save

  // Runtime setting, not read from config.json: keep only each layer's input during training and
  // recompute the layer in the backward pass (less activation memory for ~1/3 more compute).
  bool recompute_layers = false;
  // Runtime setting: bf16 mixed-precision training. The decoder rounds every matmul input to bf16
  // (to_bf16) and the model reads bf16 copies of its matmul weights (Bf16ComputeWeights).
  bool bf16_compute = false;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads the rotary settings of config.json, in transformers 4 (rope_theta + rope_scaling) or
// transformers 5 (rope_parameters, optionally keyed by layer type) spelling.
RopeConfig rope_from_hf(const nlohmann::json& cfg, const nlohmann::json& params, float default_theta,
                        int64_t head_dim);

// Typed accessors with a clear error naming the key.
int64_t hf_int(const nlohmann::json& cfg, const char* key);
int64_t hf_int_or(const nlohmann::json& cfg, const char* key, int64_t fallback);
double hf_float_or(const nlohmann::json& cfg, const char* key, double fallback);
bool hf_bool_or(const nlohmann::json& cfg, const char* key, bool fallback);
std::string hf_string_or(const nlohmann::json& cfg, const char* key, const std::string& fallback);

}  // namespace lathe
