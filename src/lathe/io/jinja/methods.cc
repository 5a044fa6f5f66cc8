// Python str and dict methods (see methods.h).
#include "lathe/io/jinja/methods.h"

#include <array>

#include "lathe/io/jinja/operators.h"
#include "lathe/io/jinja/py_format.h"
#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

constexpr std::array<std::string_view, 31> kStrMethods = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "replace",
    "upper", "lower", "title", "capitalize", "find", "rfind", "index", "count", "join", "format",
    "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "center", "ljust", "rjust", "zfill",
    "removeprefix", "removesuffix"};
constexpr std::array<std::string_view, 4> kDictMethods = {"items", "keys", "values", "get"};

template <size_t N>
bool listed(const std::array<std::string_view, N>& table, std::string_view name) {
  for (std::string_view m : table)
    if (m == name) return true;
  return false;
}

std::optional<std::string> opt_string(const CallArgs& a, size_t i, std::string_view name, std::string_view fn) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return std::nullopt;
  if (!v->is_string()) throw EvalError(std::string(fn) + "() argument must be str or None, not " + v->type_name());
  return v->as_string();
}

const std::string& req_string(const CallArgs& a, size_t i, std::string_view name, std::string_view fn) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string())
    throw EvalError(std::string(fn) + "() argument '" + std::string(name) + "' must be str");
  return v->as_string();
}

int64_t opt_int(const CallArgs& a, size_t i, std::string_view name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool()) throw EvalError("'" + v->type_name() + "' object cannot be interpreted as an integer");
  return v->as_int();
}

Value string_list(std::vector<std::string> parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (std::string& p : parts) items.emplace_back(std::move(p));
  return Value::list(std::move(items));
}

// startswith/endswith accept one prefix or a tuple of them.
bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) throw EvalError("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_array()) {
    for (const Value& a : affix.array().items)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// str.format with automatic ({}) or explicit ({0}, {name}) fields; format specs are not supported.
std::string py_format_call(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw EvalError("Single '{' encountered in format string");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) throw EvalError("format specs in str.format() are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      const size_t idx = std::stoul(field);
      v = idx < args.positional.size() ? &args.positional[idx] : nullptr;
    } else {
      for (const auto& [k, kv] : args.keyword)
        if (k == field) v = &kv;
    }
    if (!v) throw EvalError("str.format(): no argument for field '{" + field + "}'");
    out += py_str(*v);
    i = close;
  }
  return out;
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!pred(utf8_decode(s, i))) return false;
  return true;
}

Value pad(const std::string& s, const CallArgs& args, std::string_view how) {
  const int64_t width = opt_int(args, 0, "width", 0);
  const std::string fill = args.get(1, "fillchar") ? req_string(args, 1, "fillchar", how) : " ";
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return Value(s);
  const int64_t total = width - len;
  int64_t left = how == "rjust" ? total : how == "ljust" ? 0 : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}

Value string_method(const std::string& s, std::string_view m, const CallArgs& a, const RenderOptions& limits) {
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return Value(py_strip(s, opt_string(a, 0, "chars", m), m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit") {
    auto sep = opt_string(a, 0, "sep", m);
    if (sep && sep->empty()) throw EvalError("empty separator");
    const int64_t maxsplit = opt_int(a, 1, "maxsplit", -1);
    return string_list(m == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (m == "splitlines") return string_list(py_splitlines(s, a.get(0, "keepends") && a.get(0, "keepends")->truthy()));
  if (m == "startswith" || m == "endswith") {
    const Value* affix = a.get(0, "prefix");
    if (!affix) throw EvalError(std::string(m) + "() takes at least 1 argument");
    return Value(affix_match(s, *affix, m == "startswith"));
  }
  if (m == "replace") {
    std::string out = py_replace(s, req_string(a, 0, "old", m), req_string(a, 1, "new", m), opt_int(a, 2, "count", -1));
    if (out.size() > limits.max_output_bytes) throw LimitError("string longer than the output limit");
    return Value(std::move(out));
  }
  if (m == "upper") return Value(py_upper(s));
  if (m == "lower") return Value(py_lower(s));
  if (m == "title") return Value(py_title(s));
  if (m == "capitalize") return Value(py_capitalize(s));
  if (m == "find" || m == "rfind" || m == "index" || m == "count") {
    const std::string& sub = req_string(a, 0, "sub", m);
    if (m == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    const size_t p = m == "rfind" ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (m == "index") throw EvalError("substring not found");
      return Value(int64_t{-1});
    }
    return Value(static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, p))));
  }
  if (m == "join") {
    const Value* seq = a.get(0, "iterable");
    if (!seq) throw EvalError("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*seq)) {
      if (!v.is_string()) throw EvalError("sequence item: expected str instance, " + v.type_name() + " found");
      if (!first) out += s;
      out += v.as_string();
      first = false;
      if (out.size() > limits.max_output_bytes) throw LimitError("string longer than the output limit");
    }
    return Value(std::move(out));
  }
  if (m == "format") return Value(py_format_call(s, a));
  if (m == "isdigit") return Value(all_chars(s, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (m == "isalpha") return Value(all_chars(s, py_isalpha));
  if (m == "isalnum") return Value(all_chars(s, py_isalnum));
  if (m == "isspace") return Value(all_chars(s, py_isspace));
  if (m == "isupper" || m == "islower") {
    const std::string same = m == "isupper" ? py_upper(s) : py_lower(s);
    const std::string other = m == "isupper" ? py_lower(s) : py_upper(s);
    return Value(same == s && other != s);
  }
  if (m == "center" || m == "ljust" || m == "rjust") return pad(s, a, m);
  if (m == "zfill") {
    const auto width = static_cast<size_t>(std::max<int64_t>(0, opt_int(a, 0, "width", 0)));
    const size_t len = utf8_length(s);
    if (width <= len) return Value(s);
    const size_t sign = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return Value(s.substr(0, sign) + std::string(width - len, '0') + s.substr(sign));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    const std::string& x = req_string(a, 0, m == "removeprefix" ? "prefix" : "suffix", m);
    if (!affix_match(s, Value(x), m == "removeprefix")) return Value(s);
    return Value(m == "removeprefix" ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
  }
  throw EvalError("str has no method '" + std::string(m) + "'");
}

Value dict_method(const ObjectBox& d, std::string_view m, const CallArgs& a) {
  if (m == "items" || m == "keys" || m == "values") {
    a.check(m, {});
    std::vector<Value> out;
    for (const auto& [k, v] : d.entries) {
      if (m == "items") out.push_back(Value::tuple({Value(k), v}));
      else out.push_back(m == "keys" ? Value(k) : v);
    }
    return Value::list(std::move(out));
  }
  // get(key, default=None)
  a.check(m, {"key", "default"});
  const Value* key = a.get(0, "key");
  if (!key) throw EvalError("get expected at least 1 argument, got 0");
  if (key->is_string())
    if (const Value* v = d.find(key->as_string())) return *v;
  const Value* dflt = a.get(1, "default");
  return dflt ? *dflt : Value::none();
}

}  // namespace

bool has_method(const Value& obj, std::string_view name) {
  if (obj.is_string()) return listed(kStrMethods, name);
  if (obj.is_object() && !obj.object().is_namespace) return listed(kDictMethods, name);
  return false;
}

std::optional<Value> call_method(const Value& obj, std::string_view name, const CallArgs& args,
                                 const RenderOptions& limits) {
  if (!has_method(obj, name)) return std::nullopt;
  if (obj.is_string()) return string_method(obj.as_string(), name, args, limits);
  return dict_method(obj.object(), name, args);
}

}  // namespace lathe::jinja
