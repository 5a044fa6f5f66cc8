// Python str()/repr()/json.dumps() of Jinja values (see py_format.h).
#include "lathe/io/jinja/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

constexpr int kMaxFormatDepth = 512;  // a namespace may contain itself

void append_hex(std::string& out, const char* prefix, unsigned v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, digits, v);
  out += buf;
}

// Characters repr() escapes: controls, and the non-printable non-ASCII ranges templates meet
// (C1 controls, NBSP, zero-width and bidi marks, line/paragraph separators, BOM, surrogates).
bool repr_escapes(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || (c >= 0x2000 && c <= 0x200F) ||
         (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF ||
         (c >= 0xD800 && c <= 0xF8FF);
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = utf8_decode(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (repr_escapes(c)) {
      if (c < 0x100) append_hex(out, "\\x", c, 2);
      else append_hex(out, "\\u", c, 4);
    } else {
      out.append(s, start, i - start);
    }
  }
  out += quote;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = utf8_decode(s, i);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {  // UTF-16 surrogate pair, as Python writes it
            const char32_t v = c - 0x10000;
            append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
            append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
          } else {
            append_hex(out, "\\u", c, 4);
          }
        } else {
          out.append(s, start, i - start);
        }
    }
  }
  out += '"';
}

void repr_into(std::string& out, const Value& v, int depth);

void repr_items(std::string& out, const Value& v, int depth) {
  if (v.is_array()) {
    const ArrayBox& a = v.array();
    out += a.is_tuple ? '(' : '[';
    for (size_t i = 0; i < a.items.size(); ++i) {
      if (i) out += ", ";
      repr_into(out, a.items[i], depth + 1);
    }
    if (a.is_tuple && a.items.size() == 1) out += ',';
    out += a.is_tuple ? ')' : ']';
    return;
  }
  const ObjectBox& o = v.object();
  out += o.is_namespace ? "<Namespace {" : "{";
  for (size_t i = 0; i < o.entries.size(); ++i) {
    if (i) out += ", ";
    out += repr_string(o.entries[i].first);
    out += ": ";
    repr_into(out, o.entries[i].second, depth + 1);
  }
  out += o.is_namespace ? "}>" : "}";
}

void repr_into(std::string& out, const Value& v, int depth) {
  if (depth > kMaxFormatDepth) throw EvalError("value nested too deeply to print (does it contain itself?)");
  switch (v.kind()) {
    case Value::Kind::kUndefined: break;
    case Value::Kind::kString: out += repr_string(v.as_string()); break;
    case Value::Kind::kArray:
    case Value::Kind::kObject: repr_items(out, v, depth); break;
    default: out += py_str(v);
  }
}

void json_into(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
  if (depth > kMaxFormatDepth) throw EvalError("value nested too deeply for tojson (does it contain itself?)");
  auto newline = [&](int level) {
    if (!o.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += py_float_repr(d);
      return;
    }
    case Value::Kind::kString: json_string(out, v.as_string(), o.ensure_ascii); return;
    case Value::Kind::kArray: {
      const auto& items = v.array().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        json_into(out, items[i], o, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kObject: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.object().entries) entries.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_separator;
        newline(depth + 1);
        json_string(out, entries[i]->first, o.ensure_ascii);
        out += o.key_separator;
        json_into(out, entries[i]->second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    default:
      throw EvalError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits from to_chars (the same digits Python's repr picks), then Python's
  // layout: positional for 1e-4 <= |d| < 1e16, else d.ddde+XX with at least two exponent digits.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  if (sci[0] == '-') {
    out += '-';
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e_pos + 1));
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string int_part = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      int_part.append(exp + 1 - int_part.size(), '0');
      const std::string frac = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out += int_part + "." + frac;
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char e_buf[16];
  std::snprintf(e_buf, sizeof(e_buf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + e_buf;
}

std::string py_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(v.as_int());
    case Value::Kind::kFloat: return py_float_repr(v.as_double());
    case Value::Kind::kString: return v.as_string();
    case Value::Kind::kCallable: return "<function " + v.callable().name + ">";
    default: {
      std::string out;
      repr_items(out, v, 0);
      return out;
    }
  }
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

std::string py_json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  json_into(out, v, options, 0);
  return out;
}

}  // namespace lathe::jinja
