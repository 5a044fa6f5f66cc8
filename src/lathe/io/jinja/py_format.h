// How Python turns values into text, which a rendered prompt must match byte for byte: str()
// (what `{{ x }}` prints), repr() (inside printed lists/dicts) and json.dumps() (the `tojson`
// filter transformers installs: ensure_ascii=False, separators ", " / ": ", key order kept).
#pragma once

#include <optional>
#include <string>

#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

std::string py_float_repr(double d);  // repr(float): shortest round-trip, "1.0", "1e-05", "1e+16"
std::string py_str(const Value& v);   // str(v); undefined prints as ""
std::string py_repr(const Value& v);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps(indent=): nullopt = one line; an int becomes spaces
  std::string item_separator = ", ";  // Python's default, or "," when indent is given
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // transformers' tojson passes ensure_ascii=False
};
std::string py_json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace lathe::jinja
