#include "lathe/models/config.h"

#include "lathe/base/error.h"

namespace lathe {
using nlohmann::json;

namespace {
bool present(const json& cfg, const char* key) { return cfg.is_object() && cfg.contains(key) && !cfg[key].is_null(); }
}  // namespace

int64_t hf_int(const json& cfg, const char* key) {
  LATHE_CHECK_ARG(present(cfg, key), "config.json: missing required key '", key, "'");
  LATHE_CHECK_ARG(cfg[key].is_number_integer(), "config.json: '", key, "' must be an integer, got ", cfg[key].dump());
  return cfg[key].get<int64_t>();
}
int64_t hf_int_or(const json& cfg, const char* key, int64_t fallback) {
  return present(cfg, key) ? hf_int(cfg, key) : fallback;
}
double hf_float_or(const json& cfg, const char* key, double fallback) {
  if (!present(cfg, key)) return fallback;
  LATHE_CHECK_ARG(cfg[key].is_number(), "config.json: '", key, "' must be a number, got ", cfg[key].dump());
  return cfg[key].get<double>();
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

RopeConfig rope_from_hf(const json& cfg, const json& params, float default_theta, int64_t head_dim) {
  RopeConfig r;
  r.theta = static_cast<float>(hf_float_or(params, "rope_theta", hf_float_or(cfg, "rope_theta", default_theta)));
  r.rotary_dim = static_cast<int>(head_dim * hf_float_or(cfg, "partial_rotary_factor", 1.0));
  const std::string type = hf_string_or(params, "rope_type", hf_string_or(params, "type", "default"));
  if (type == "default" || params.is_null()) {
    r.scaling = RopeScaling::kNone;
  } else if (type == "linear") {
    r.scaling = RopeScaling::kLinear;
    r.factor = static_cast<float>(hf_float_or(params, "factor", 1.0));
  } else if (type == "llama3") {
    r.scaling = RopeScaling::kLlama3;
    r.factor = static_cast<float>(hf_float_or(params, "factor", 8.0));
    r.low_freq_factor = static_cast<float>(hf_float_or(params, "low_freq_factor", 1.0));
    r.high_freq_factor = static_cast<float>(hf_float_or(params, "high_freq_factor", 4.0));
    r.original_max_position = static_cast<int>(hf_int_or(params, "original_max_position_embeddings", 8192));
  } else {
    throw NotImplemented(str_cat("config.json: rope type '", type, "' is not supported (default, linear, llama3)"));
  }
  return r;
}

}  // namespace lathe
