// ModelConfig: the runtime description of a decoder, filled from a Hugging Face config.json by the
// family files. Every family is this one struct with different values (DESIGN.md "one decoder").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
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

// The config.json key behind each count of ModelConfig, for error messages (GPT-2 spells its own).
struct ConfigKeys {
  const char* vocab_size = "vocab_size";
  const char* hidden = "hidden_size";
  const char* n_layers = "num_hidden_layers";
  const char* n_heads = "num_attention_heads";
  const char* n_kv_heads = "num_key_value_heads";
  const char* head_dim = "head_dim";
  const char* ffn = "intermediate_size";
  const char* max_positions = "max_position_embeddings";
  const char* norm_eps = "rms_norm_eps";
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
  int64_t head_dim = 0;    // D (0 as read: hidden / n_heads, filled in after validation)
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
  bool scale_embeddings = false;   // Gemma: the embeddings are multiplied by sqrt(C) (embed_scale)
  float embed_scale = 1.f;         // derived: sqrt(C) rounded to the activation dtype as HF does, or 1
  float attn_scale = 0.f;          // softmax scale (0 as read: 1/sqrt(D), or 1/sqrt(query_pre_attn_scalar))
  float attn_softcap = 0.f;        // Gemma 2 (0: off)
  float final_softcap = 0.f;       // Gemma 2 final logits (0: off)

  // Mixture of experts (Qwen3-MoE).
  int64_t n_experts = 0;   // E
  int64_t top_k = 0;       // K
  int64_t moe_ffn = 0;     // expert MLP width
  bool norm_topk_prob = true;
  bool fused_experts = false;  // transformers-5 layout (experts.gate_up_proj / experts.down_proj)

  // As read from config.json; after validate_config they become `layers` (one entry per layer).
  ConfigKeys keys;                              // the key names above, as this family spells them
  std::vector<std::string> layer_types;         // transformers 5: "sliding_attention" | "full_attention"
  std::optional<int64_t> sliding_window_pattern;  // Gemma 2/3 (transformers 4): every Nth layer global
  int64_t sliding_window = 0;                   // window of the sliding layers (all layers: no pattern)
  RopeConfig rope, local_rope;                  // global layers / sliding layers (rotary_dim filled later)
  double partial_rotary_factor = 1.0;           // R = int(D * factor)
  std::optional<double> query_pre_attn_scalar;  // Gemma: softmax scale 1/sqrt(this) instead of 1/sqrt(D)
  MlpKind mlp = MlpKind::kGated;                // the MLP of dense layers
  int64_t decoder_sparse_step = 1;              // MoE: every Nth layer is sparse ...
  std::vector<int64_t> mlp_only_layers;         // ... except these

  double initializer_range = 0.02;  // std of the weights Model::create draws (validated: in (0, 1])

  std::vector<LayerConfig> layers;
  std::vector<int> eos_token_ids;
  int bos_token_id = -1;
  int pad_token_id = -1;

  nlohmann::json hf_config;  // config.json as read, written back unchanged on save

  // Run options (recompute, bf16 compute) are per call: ForwardOptions (nn/forward_options.h).

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
};

// config.json text -> a validated ModelConfig with its per-layer list: the family (registry) reads the
// values, validate_config checks them, then the derived fields (head_dim, layers, attn_scale, embed_scale,
// rotary dims) are filled in. Errors (InvalidArgument, FormatError, NotImplemented) start with `where` and name the key.
ModelConfig parse_model_config(const std::string& text, const std::string& where);

// The one validation pass over a config as read (and again once derived, or for one built by hand):
// every count, size, divisor, list and pattern, so that nothing downstream divides by zero, indexes past
// a list or allocates from a negative or absurd count. Throws InvalidArgument naming the config.json key.
void validate_config(const ModelConfig& c);

// Reads the rotary settings of config.json, in transformers 4 (rope_theta + rope_scaling) or
// transformers 5 (rope_parameters, optionally keyed by layer type) spelling; rotary_dim is left 0.
RopeConfig rope_from_hf(const nlohmann::json& cfg, const nlohmann::json& params, float default_theta);

// The object under `key`, or null when it is absent or null; anything else (a string such as "llama3", a
// number, a list) is an InvalidArgument naming the key (as `shown` when given: "rope_parameters.x"), never
// read as "not set".
nlohmann::json hf_object_or_null(const nlohmann::json& cfg, const char* key, const char* shown = nullptr);
// The rotary settings object: rope_parameters (transformers 5) when set, else rope_scaling (4.x); each
// must be an object or null (hf_object_or_null).
nlohmann::json hf_rope_params(const nlohmann::json& cfg);
// A set quantization_config (an object or null, else InvalidArgument) is NotImplemented naming its
// quant_method, unless it is lathe's own (quant_method "lathe" with a known "format": docs/quantization.md,
// loaded by Model::load): other packed tensors would otherwise fail later as unexpected names.
void check_quantization_config(const nlohmann::json& cfg);

// Typed accessors with a clear error naming the key.
int64_t hf_int(const nlohmann::json& cfg, const char* key);
std::vector<int64_t> hf_int_list_or_empty(const nlohmann::json& cfg, const char* key);
std::vector<std::string> hf_string_list_or_empty(const nlohmann::json& cfg, const char* key);
// eos_token_id: an integer or a list of them (absent or null: none).
std::vector<int> hf_token_ids(const nlohmann::json& cfg, const char* key);
// a * b, or INT64_MAX when that overflows (defaults such as 4 x hidden, computed before validation).
int64_t saturating_mul(int64_t a, int64_t b);
int64_t hf_int_or(const nlohmann::json& cfg, const char* key, int64_t fallback);
double hf_float_or(const nlohmann::json& cfg, const char* key, double fallback);
float hf_f32_or(const nlohmann::json& cfg, const char* key, double fallback);  // also: fits in f32
bool hf_bool_or(const nlohmann::json& cfg, const char* key, bool fallback);
std::string hf_string_or(const nlohmann::json& cfg, const char* key, const std::string& fallback);

}  // namespace lathe
