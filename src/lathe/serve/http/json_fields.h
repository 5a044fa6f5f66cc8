// Typed, validated reads of a request's JSON object. Every read names its field, so a bad value becomes
// a 400 whose "param" says which one; the reader remembers which keys it read, so the ones left over
// are the request's unknown fields. A JSON null counts as absent (OpenAI clients send explicit nulls).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace lathe::serve {

class JsonFields {
 public:
  explicit JsonFields(const nlohmann::json& object);  // throws ApiException unless object is an object

  // nullptr when absent or null; marks the key as read.
  const nlohmann::json* find(const std::string& key);

  std::optional<bool> opt_bool(const std::string& key);
  // Integers in [lo, hi]; an integral float (16.0) counts as an integer.
  std::optional<int64_t> opt_int(const std::string& key, int64_t lo, int64_t hi);
  // Finite numbers in [lo, hi].
  std::optional<double> opt_number(const std::string& key, double lo, double hi);
  std::optional<std::string> opt_string(const std::string& key);
  // A string or a list of strings (OpenAI `stop`).
  std::optional<std::vector<std::string>> opt_string_or_strings(const std::string& key);
  std::optional<std::vector<int32_t>> opt_int_list(const std::string& key, int64_t lo, int64_t hi);

  // Keys present (null or not) that no read asked for, in key order.
  std::vector<std::string> unread_keys() const;

 private:
  const nlohmann::json& object_;
  std::set<std::string> read_;
};

// The JSON type name a message shows ("string", "number", "array", ...).
std::string json_type_name(const nlohmann::json& v);

// An integer value of v (integral floats included) in [lo, hi]; throws a 400 naming `param` otherwise.
int64_t json_int(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& param);

}  // namespace lathe::serve
