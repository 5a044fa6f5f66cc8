// parse_model_config and validate_config: config.json text -> family values -> one validation pass ->
// derived fields. Everything downstream (bindings, the decoder, the KV cache) may then trust the counts.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lathe/base/checked_size.h"
#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/models/family.h"

namespace lathe {
using nlohmann::json;

namespace {

// Per-layer lists are allocated from these counts before any weight is read (real models: < 200 layers,
// <= 512 experts), so an absurd value must fail here rather than in an allocation.
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxExperts = int64_t{1} << 16;
constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // kernels and token ids take int sizes
// One tensor's element count: keeps byte sizes and parameter sums far from int64 overflow.
constexpr int64_t kMaxTensorElements = int64_t{1} << 48;

std::string key_name(const char* key) { return str_cat("config.json: '", key, "'"); }

void check_range(int64_t v, const char* key, int64_t lo, int64_t hi) { checked_size<int64_t>(v, key_name(key), lo, hi); }

void check_number(double v, const char* key, bool zero_ok) {
  LATHE_CHECK_ARG(std::isfinite(v) && (zero_ok ? v >= 0 : v > 0), key_name(key), " must be a finite number ",
                  zero_ok ? ">= 0" : "> 0", ", got ", v);
}

// The product of dims (each already in [1, kMaxDim] or [1, kMaxExperts]) must stay <= kMaxTensorElements.
void check_elements(std::initializer_list<int64_t> dims, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : dims) {
    LATHE_CHECK_ARG(!__builtin_mul_overflow(n, d, &n) && n <= kMaxTensorElements, "config.json: ", what,
                    " would have more than 2^48 elements");
  }
}

void check_rope(const RopeConfig& r, const char* which) {
  check_number(r.theta, which, false);
  check_number(r.factor, "rope_scaling.factor", false);
  if (r.scaling == RopeScaling::kLlama3) {
    check_number(r.low_freq_factor, "rope_scaling.low_freq_factor", false);
    check_number(r.high_freq_factor, "rope_scaling.high_freq_factor", false);
    LATHE_CHECK_ARG(r.low_freq_factor != r.high_freq_factor,
                    "config.json: 'rope_scaling.low_freq_factor' and 'high_freq_factor' must differ, both are ",
                    r.low_freq_factor);
    check_range(r.original_max_position, "rope_scaling.original_max_position_embeddings", 1, kMaxDim);
  }
}

constexpr const char* kLayerTypes[] = {"full_attention", "sliding_attention"};

// Fills what the validated values imply: head_dim, the softmax and embedding scales, rotary dims and the
// layer list.
void derive(ModelConfig& c) {
  if (c.head_dim == 0) c.head_dim = c.hidden / c.n_heads;
  // HF multiplies by sqrt(C) cast to the activation dtype: in f32 that is the f32-rounded value.
  if (c.scale_embeddings) c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.hidden)));
  if (c.attn_scale == 0.f)
    c.attn_scale = c.query_pre_attn_scalar ? static_cast<float>(1.0 / std::sqrt(*c.query_pre_attn_scalar))
                                           : 1.f / std::sqrt(static_cast<float>(c.head_dim));
  // transformers: int(head_dim * partial_rotary_factor).
  c.rope.rotary_dim = c.local_rope.rotary_dim = static_cast<int>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  c.layers.assign(static_cast<size_t>(c.n_layers), LayerConfig{0, c.rope, c.mlp});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    bool sliding = c.sliding_window > 0;  // no pattern and no list: every layer or none
    if (!c.layer_types.empty()) {
      sliding = c.layer_types[i] == "sliding_attention";
    } else if (c.sliding_window_pattern) {
      sliding = (i + 1) % *c.sliding_window_pattern != 0;
    }
    LayerConfig& lc = c.layers[i];
    lc.window = sliding ? static_cast<int>(c.sliding_window) : 0;
    lc.rope = sliding ? c.local_rope : c.rope;
    if (c.n_experts > 0) {
      const bool dense = std::find(c.mlp_only_layers.begin(), c.mlp_only_layers.end(), i) != c.mlp_only_layers.end();
      lc.mlp = !dense && (i + 1) % c.decoder_sparse_step == 0 ? MlpKind::kMoe : MlpKind::kGated;
    }
  }
}

}  // namespace

void validate_config(const ModelConfig& c) {
  const ConfigKeys& k = c.keys;
  check_range(c.vocab_size, k.vocab_size, 1, kMaxDim);
  check_range(c.hidden, k.hidden, 1, kMaxDim);
  check_range(c.n_layers, k.n_layers, 1, kMaxLayers);
  check_range(c.n_heads, k.n_heads, 1, kMaxDim);
  check_range(c.n_kv_heads, k.n_kv_heads, 1, c.n_heads);
  LATHE_CHECK_ARG(c.n_heads % c.n_kv_heads == 0, "config.json: '", k.n_heads, "' = ", c.n_heads,
                  " is not divisible by '", k.n_kv_heads, "' = ", c.n_kv_heads,
                  " (each key/value head serves a whole group of query heads)");
  int64_t head_dim = c.head_dim;
  if (head_dim == 0) {  // not in config.json: hidden / n_heads
    LATHE_CHECK_ARG(c.hidden % c.n_heads == 0, "config.json: '", k.hidden, "' = ", c.hidden, " is not divisible by '",
                    k.n_heads, "' = ", c.n_heads, " (the head size would not be whole)");
    head_dim = c.hidden / c.n_heads;
  } else {
    check_range(head_dim, k.head_dim, 1, kMaxDim);
  }
  check_range(c.ffn, k.ffn, 1, kMaxDim);
  check_range(c.max_positions, k.max_positions, 1, kMaxDim);
  LATHE_CHECK_ARG(c.n_heads * head_dim <= kMaxDim, "config.json: '", k.n_heads, "' x head size = ", c.n_heads, " x ",
                  head_dim, " exceeds ", kMaxDim);
  check_elements({c.vocab_size, c.hidden}, str_cat("the embedding ('", k.vocab_size, "' x '", k.hidden, "')"));
  check_elements({c.n_heads * head_dim, c.hidden}, str_cat("the attention projection ('", k.n_heads, "' x head size x '", k.hidden, "')"));
  check_elements({c.ffn, c.hidden}, str_cat("the MLP ('", k.ffn, "' x '", k.hidden, "')"));
  if (c.learned_positions) check_elements({c.max_positions, c.hidden}, str_cat("the position embedding ('", k.max_positions, "' x '", k.hidden, "')"));

  check_number(c.norm_eps, k.norm_eps, true);
  check_number(c.attn_softcap, "attn_logit_softcapping", true);
  check_number(c.final_softcap, "final_logit_softcapping", true);
  check_number(c.embed_scale, k.hidden, false);
  check_number(c.attn_scale, "attention scale", true);  // 0 as read: derived below
  if (c.query_pre_attn_scalar) check_number(*c.query_pre_attn_scalar, "query_pre_attn_scalar", false);
  // Model::create draws weights ~ normal(0, this): 1e38 would give inf weights. Real configs: 0.002 - 0.1.
  LATHE_CHECK_ARG(std::isfinite(c.initializer_range) && c.initializer_range > 0 && c.initializer_range <= 1,
                  key_name("initializer_range"), " must be a finite number in (0, 1], got ", c.initializer_range);

  if (!c.learned_positions) {
    LATHE_CHECK_ARG(std::isfinite(c.partial_rotary_factor) && c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1,
                    "config.json: 'partial_rotary_factor' must be in (0, 1], got ", c.partial_rotary_factor);
    const int64_t rotary = static_cast<int64_t>(static_cast<double>(head_dim) * c.partial_rotary_factor);
    LATHE_CHECK_ARG(rotary >= 2 && rotary % 2 == 0, "config.json: the rotary dims, '", k.head_dim, "' ", head_dim,
                    " x 'partial_rotary_factor' ", c.partial_rotary_factor, " = ", rotary, ", must be even and >= 2");
    check_rope(c.rope, "rope_theta");
    check_rope(c.local_rope, "rope_local_base_freq");
  }

  check_range(c.sliding_window, "sliding_window", 0, kMaxDim);
  if (c.sliding_window_pattern) check_range(*c.sliding_window_pattern, "sliding_window_pattern", 1, kMaxLayers);
  if (!c.layer_types.empty()) {
    LATHE_CHECK_ARG(static_cast<int64_t>(c.layer_types.size()) == c.n_layers, "config.json: 'layer_types' has ",
                    c.layer_types.size(), " entries but '", k.n_layers, "' is ", c.n_layers);
    for (size_t i = 0; i < c.layer_types.size(); ++i) {
      const std::string& t = c.layer_types[i];
      LATHE_CHECK_ARG(std::find(std::begin(kLayerTypes), std::end(kLayerTypes), t) != std::end(kLayerTypes),
                      "config.json: 'layer_types'[", i, "] is '", t, "'; accepted values: full_attention, sliding_attention");
    }
  }
  const bool any_sliding =
      c.sliding_window_pattern.has_value() ||
      std::find(c.layer_types.begin(), c.layer_types.end(), "sliding_attention") != c.layer_types.end();
  if (any_sliding) check_range(c.sliding_window, "sliding_window", 1, kMaxDim);

  if (c.n_experts != 0 || c.top_k != 0 || c.moe_ffn != 0) {
    check_range(c.n_experts, "num_experts", 1, kMaxExperts);
    check_range(c.top_k, "num_experts_per_tok", 1, c.n_experts);
    check_range(c.moe_ffn, "moe_intermediate_size", 1, kMaxDim);
    check_elements({c.n_experts, 2, c.moe_ffn, c.hidden}, "the experts ('num_experts' x 2 x 'moe_intermediate_size' x '" + std::string(k.hidden) + "')");
    check_range(c.decoder_sparse_step, "decoder_sparse_step", 1, kMaxLayers);
    for (int64_t l : c.mlp_only_layers) check_range(l, "mlp_only_layers", 0, c.n_layers - 1);
  }
  for (int id : c.eos_token_ids) check_range(id, "eos_token_id", 0, kMaxDim);
  check_range(c.bos_token_id, "bos_token_id", -1, kMaxDim);
  check_range(c.pad_token_id, "pad_token_id", -1, kMaxDim);

  // The derived fields (after parse_model_config, or in a config built by hand): present once `layers` is
  // filled, and then they must be usable as they are, since the decoder sizes and divides with them.
  if (c.layers.empty()) return;
  LATHE_CHECK_ARG(static_cast<int64_t>(c.layers.size()) == c.n_layers, "[validate_config] ", c.layers.size(),
                  " layer entries for '", k.n_layers, "' = ", c.n_layers);
  check_range(c.head_dim, k.head_dim, 1, kMaxDim);  // q_dim(), kv_dim(), the q/k norms and the KV cache
  check_number(c.attn_scale, "attention scale", false);
  for (const LayerConfig& lc : c.layers) {
    check_range(lc.window, "sliding_window", 0, kMaxDim);
    if (!c.learned_positions) check_rope(lc.rope, "rope_theta");
    if (!c.learned_positions)
      LATHE_CHECK_ARG(lc.rope.rotary_dim >= 2 && lc.rope.rotary_dim % 2 == 0 && lc.rope.rotary_dim <= head_dim,
                      "[validate_config] rotary_dim ", lc.rope.rotary_dim, " must be even, in [2, ", head_dim, "]");
    LATHE_CHECK_ARG(lc.mlp != MlpKind::kMoe || c.n_experts > 0, "[validate_config] a sparse layer needs 'num_experts'");
  }
}

ModelConfig parse_model_config(const std::string& text, const std::string& where) {
  ModelConfig c;
  c.hf_config = parse_json_object(text, where);
  // The accessors' messages start "config.json: "; `where` already names the file.
  auto located = [&](const Error& e) {
    std::string msg = e.what();
    if (where.ends_with("config.json") && msg.starts_with("config.json: ")) msg = msg.substr(13);
    return str_cat(where, ": ", msg);
  };
  try {
    const Family& fam = find_family(c.hf_config);
    c.family = fam.name;
    c.architecture = fam.architectures[0];
    c.model_type = hf_string_or(c.hf_config, "model_type", "");
    fam.parse_config(c.hf_config, c);
    // Keys every family reads the same way.
    c.initializer_range = hf_float_or(c.hf_config, "initializer_range", 0.02);
    check_quantization_config(c.hf_config);
    validate_config(c);
    derive(c);
    validate_config(c);
  } catch (const NotImplemented& e) {
    throw NotImplemented(located(e));
  } catch (const Error& e) {
    throw InvalidArgument(located(e));
  }
  return c;
}

}  // namespace lathe
