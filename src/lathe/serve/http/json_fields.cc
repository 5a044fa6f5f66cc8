#include "lathe/serve/http/json_fields.h"

#include <cmath>

#include "lathe/base/error.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiException(invalid_request(str_cat("'", param, "' ", message), param));
}

}  // namespace

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_number()) return "number";
  return v.type_name();  // "null", "boolean", "string", "array", "object"
}

int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& param) {
  int64_t x = 0;
  if (v.is_number_integer()) {
    // Unsigned values above INT64_MAX are out of every range below.
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      bad(param, str_cat("must be in [", lo, ", ", hi, "], got ", v.dump()));
    }
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    // 2^63 bounds the cast; an integral float (16.0) is an integer, as in pydantic's lax mode.
    if (!std::isfinite(d) || std::floor(d) != d || std::fabs(d) >= 9.2e18) {
      bad(param, str_cat("must be an integer, got ", v.dump()));
    }
    x = static_cast<int64_t>(d);
  } else {
    bad(param, str_cat("must be an integer, got ", json_type_name(v)));
  }
  if (x < lo || x > hi) bad(param, str_cat("must be in [", lo, ", ", hi, "], got ", x));
  return x;
}

JsonFields::JsonFields(const nlohmann::json& object) : object_(object) {
  if (!object.is_object()) {
    throw ApiException(invalid_request(str_cat("the request body must be a JSON object, got ", json_type_name(object))));
  }
}

const nlohmann::json* JsonFields::find(const std::string& key) {
  read_.insert(key);
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> JsonFields::opt_bool(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, str_cat("must be a boolean, got ", json_type_name(*v)));
  return v->get<bool>();
}

std::optional<int64_t> JsonFields::opt_int(const std::string& key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  return json_int(*v, lo, hi, key);
}

std::optional<double> JsonFields::opt_number(const std::string& key, double lo, double hi) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad(key, str_cat("must be a number, got ", json_type_name(*v)));
  double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(key, str_cat("must be in [", lo, ", ", hi, "], got ", v->dump()));
  return x;
}

std::optional<std::string> JsonFields::opt_string(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad(key, str_cat("must be a string, got ", json_type_name(*v)));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> JsonFields::opt_string_or_strings(const std::string& key) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) bad(key, str_cat("must be a string or a list of strings, got ", json_type_name(*v)));
  std::vector<std::string> out;
  for (const nlohmann::json& s : *v) {
    if (!s.is_string()) bad(key, str_cat("must be a string or a list of strings, got a list holding ", json_type_name(s)));
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> JsonFields::opt_int_list(const std::string& key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) bad(key, str_cat("must be a list of integers, got ", json_type_name(*v)));
  std::vector<int32_t> out;
  for (const nlohmann::json& x : *v) out.push_back(static_cast<int32_t>(json_int(x, lo, hi, key)));
  return out;
}

std::vector<std::string> JsonFields::unread_keys() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : object_.items()) {
    if (!read_.count(key)) out.push_back(key);
  }
  return out;
}

}  // namespace lathe::serve
