#include "lathe/models/config.h"

#include <cmath>
#include <limits>

#include "lathe/base/checked_size.h"
#include "lathe/base/error.h"
#include "lathe/tensor/quant_weight.h"

namespace lathe {
using nlohmann::json;

namespace {
bool present(const json& cfg, const char* key) { return cfg.is_object() && cfg.contains(key) && !cfg[key].is_null(); }
}  // namespace

int64_t hf_int(const json& cfg, const char* key) {
  LATHE_CHECK_ARG(present(cfg, key), "config.json: missing required key '", key, "'");
  const json& v = cfg[key];
  LATHE_CHECK_ARG(v.is_number_integer(), "config.json: '", key, "' must be an integer, got ", v.dump());
  if (v.is_number_unsigned()) return checked_size<int64_t>(v.get<uint64_t>(), str_cat("config.json: '", key, "'"));
  return v.get<int64_t>();
}
int64_t hf_int_or(const json& cfg, const char* key, int64_t fallback) {
  return present(cfg, key) ? hf_int(cfg, key) : fallback;
}
double hf_float_or(const json& cfg, const char* key, double fallback) {
  if (!present(cfg, key)) return fallback;
  LATHE_CHECK_ARG(cfg[key].is_number(), "config.json: '", key, "' must be a number, got ", cfg[key].dump());
  return cfg[key].get<double>();
}
float hf_f32_or(const json& cfg, const char* key, double fallback) {
  const double v = hf_float_or(cfg, key, fallback);
  LATHE_CHECK_ARG(std::fabs(v) <= std::numeric_limits<float>::max(), "config.json: '", key, "' = ", v,
                  " is out of the f32 range");
  return static_cast<float>(v);
}
bool hf_bool_or(const json& cfg, const char* key, bool fallback) {
  if (!present(cfg, key)) return fallback;
  LATHE_CHECK_ARG(cfg[key].is_boolean(), "config.json: '", key, "' must be true or false, got ", cfg[key].dump());
  return cfg[key].get<bool>();
}
std::string hf_string_or(const json& cfg, const char* key, const std::string& fallback) {
  if (!present(cfg, key)) return fallback;
  LATHE_CHECK_ARG(cfg[key].is_string(), "config.json: '", key, "' must be a string, got ", cfg[key].dump());
  return cfg[key].get<std::string>();
}
std::vector<int64_t> hf_int_list_or_empty(const json& cfg, const char* key) {
  std::vector<int64_t> out;
  if (!present(cfg, key)) return out;
  const json& v = cfg[key];
  LATHE_CHECK_ARG(v.is_array(), "config.json: '", key, "' must be a list of integers, got ", v.dump());
  for (const json& e : v) {
    LATHE_CHECK_ARG(e.is_number_integer(), "config.json: '", key, "' must be a list of integers, got ", e.dump());
    out.push_back(e.is_number_unsigned() ? checked_size<int64_t>(e.get<uint64_t>(), str_cat("config.json: '", key, "'"))
                                         : e.get<int64_t>());
  }
  return out;
}
std::vector<std::string> hf_string_list_or_empty(const json& cfg, const char* key) {
  std::vector<std::string> out;
  if (!present(cfg, key)) return out;
  const json& v = cfg[key];
  LATHE_CHECK_ARG(v.is_array(), "config.json: '", key, "' must be a list of strings, got ", v.dump());
  for (const json& e : v) {
    LATHE_CHECK_ARG(e.is_string(), "config.json: '", key, "' must be a list of strings, got ", e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

json hf_object_or_null(const json& cfg, const char* key, const char* shown) {
  if (!present(cfg, key)) return json();
  LATHE_CHECK_ARG(cfg[key].is_object(), "config.json: '", shown ? shown : key, "' must be an object or null, got ",
                  cfg[key].dump());
  return cfg[key];
}

json hf_rope_params(const json& cfg) {
  return present(cfg, "rope_parameters") ? hf_object_or_null(cfg, "rope_parameters") : hf_object_or_null(cfg, "rope_scaling");
}

void check_quantization_config(const json& cfg) {
  const json q = hf_object_or_null(cfg, "quantization_config");
  if (q.is_null()) return;
  const std::string method = hf_string_or(q, "quant_method", "?");
  if (method == "lathe") {  // lathe's own layout (`lathe quantize`, docs/quantization.md): a known format
    parse_quant_spec(hf_string_or(q, "format", "?"));
    return;
  }
  // bitsandbytes 4-bit NF4 (transformers' load_in_4bit, specs/posttrain.md §3.3); not its FP4 nor LLM.int8().
  if (method == "bitsandbytes" && hf_bool_or(q, "load_in_4bit", hf_bool_or(q, "_load_in_4bit", false))) {
    const std::string type = hf_string_or(q, "bnb_4bit_quant_type", "fp4");
    if (type != "nf4")
      throw NotImplemented(str_cat("config.json: 'quantization_config': bitsandbytes 4-bit type '", type,
                                   "' is not supported (lathe reads nf4)"));
    return;
  }
  throw NotImplemented(str_cat("config.json: 'quantization_config' (quant_method '", method,
                               "'): quantized checkpoints other than lathe's own (lathe quantize) are not "
                               "supported; use the unquantized weights"));
}

std::vector<int> hf_token_ids(const json& cfg, const char* key) {
  std::vector<int> out;
  if (!present(cfg, key)) return out;
  const json& v = cfg[key];
  const std::string what = str_cat("config.json: '", key, "'");
  if (v.is_number_integer()) return {checked_size<int>(hf_int(cfg, key), what, 0)};
  LATHE_CHECK_ARG(v.is_array(), what, " must be a token id or a list of them, got ", v.dump());
  for (int64_t id : hf_int_list_or_empty(cfg, key)) out.push_back(checked_size<int>(id, what, 0));
  return out;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

RopeConfig rope_from_hf(const json& cfg, const json& params, float default_theta) {
  // The callers pass hf_object_or_null's result, which already named the key of a wrong type.
  LATHE_CHECK_ARG(params.is_null() || params.is_object(), "config.json: the rope settings must be an object or null, got ",
                  params.dump());
  RopeConfig r;
  r.theta = hf_f32_or(params, "rope_theta", hf_f32_or(cfg, "rope_theta", default_theta));
  const std::string type = hf_string_or(params, "rope_type", hf_string_or(params, "type", "default"));
  if (type == "default" || params.is_null()) {
    r.scaling = RopeScaling::kNone;
  } else if (type == "linear") {
    r.scaling = RopeScaling::kLinear;
    r.factor = hf_f32_or(params, "factor", 1.0);
  } else if (type == "llama3") {
    r.scaling = RopeScaling::kLlama3;
    r.factor = hf_f32_or(params, "factor", 8.0);
    r.low_freq_factor = hf_f32_or(params, "low_freq_factor", 1.0);
    r.high_freq_factor = hf_f32_or(params, "high_freq_factor", 4.0);
    r.original_max_position = checked_size<int>(hf_int_or(params, "original_max_position_embeddings", 8192),
                                                "config.json: 'original_max_position_embeddings'", 1);
  } else {
    throw NotImplemented(str_cat("config.json: rope type '", type, "' is not supported (default, linear, llama3)"));
  }
  return r;
}

}  // namespace lathe
