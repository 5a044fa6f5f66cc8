// Jinja filters on scalars and strings, and the filter dispatch (see filters.h).
#include "lathe/io/jinja/filters.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lathe/io/jinja/operators.h"
#include "lathe/io/jinja/py_format.h"
#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

constexpr std::array<std::string_view, 46> kFilters = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max",
    "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort",
    "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount", "batch", "striptags",
    "truncate", "pprint", "forceescape"};

const Value* arg(const CallArgs& a, size_t i, std::string_view name) { return a.get(i, name); }

bool flag(const CallArgs& a, size_t i, std::string_view name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : dflt;
}

int64_t int_arg(const CallArgs& a, size_t i, std::string_view name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool()) throw EvalError("argument '" + std::string(name) + "' must be an integer");
  return v->as_int();
}

std::string check_size(std::string s, const RenderOptions& limits) {
  if (s.size() > limits.max_output_bytes) throw LimitError("string longer than the output limit");
  return s;
}

// Python int(str, base): surrounding whitespace, sign, underscores, 0x/0o/0b prefixes (base 0 or
// matching base).
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.erase(0, 1);
  }
  if (s.size() > 2 && s[0] == '0') {
    const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    const int prefixed = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefixed && (base == 0 || base == prefixed)) {
      base = prefixed;
      s.erase(0, 2);
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() && s[i - 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty() || digits.find_first_of("+- \t") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return neg ? -v : v;
}

// Python float(str): strtod over the whole stripped string (inf/nan included).
std::optional<double> parse_float(const std::string& text) {
  const std::string s = py_strip(text, std::nullopt, true, true);
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

Value filter_int(const Value& v, const CallArgs& a) {
  const Value dflt = arg(a, 0, "default") ? *arg(a, 0, "default") : Value(int64_t{0});
  const auto base = static_cast<int>(int_arg(a, 1, "base", 10));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) return dflt;
    return Value(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return Value(*i);
    if (auto f = parse_float(v.as_string()); f && std::isfinite(*f)) return Value(static_cast<int64_t>(*f));
  }
  return dflt;
}

Value filter_float(const Value& v, const CallArgs& a) {
  const Value dflt = arg(a, 0, "default") ? *arg(a, 0, "default") : Value(0.0);
  if (v.is_number() || v.is_bool()) return Value(v.as_double());
  if (v.is_string())
    if (auto f = parse_float(v.as_string())) return Value(*f);
  return dflt;
}

Value filter_round(const Value& v, const CallArgs& a) {
  const int64_t precision = int_arg(a, 0, "precision", 0);
  const Value* method_v = arg(a, 1, "method");
  const std::string method = method_v && method_v->is_string() ? method_v->as_string() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw EvalError("method must be 'common', 'ceil' or 'floor'");
  if (!v.is_number() && !v.is_bool()) throw EvalError("round() needs a number, got " + v.type_name());
  if (method == "common") {
    if (!v.is_float() && precision >= 0) return Value(v.as_int());  // Python round(int, n) stays int
    // printf rounds the exact binary value half-to-even, as Python's round() does.
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), v.as_double());
    double r = std::strtod(buf, nullptr);
    if (precision < 0) {
      const double scale = std::pow(10.0, static_cast<double>(-precision));
      r = std::nearbyint(v.as_double() / scale) * scale;
      if (!v.is_float()) return Value(static_cast<int64_t>(r));
    }
    return Value(r);
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// Jinja's title filter (not str.title): capitalise each word after "-", whitespace or an
// opening bracket.
std::string filter_title(const std::string& s) {
  std::string out, word;
  auto flush = [&] {
    if (!word.empty()) out += py_capitalize(word);
    word.clear();
  };
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = utf8_decode(s, i);
    if (c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c)) {
      flush();
      out.append(s, start, i - start);
    } else {
      word.append(s, start, i - start);
    }
  }
  flush();
  return out;
}

std::string filter_indent(const std::string& s, const CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string indention = w && w->is_string() ? w->as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, int_arg(a, 0, "width", 4))), ' ');
  const bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  const std::vector<std::string> lines = py_splitlines(s + "\n", false);  // Jinja2's own "\n" quirk
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) rv += "\n";
    if (i > 0 && (blank || !lines[i].empty())) rv += indention;
    rv += lines[i];
  }
  if (first) rv = indention + rv;
  return rv;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// Python's "%s %d" % args for the `format` filter: flags/width/precision for s, d, i, f, r, x.
std::string percent_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    while (j < fmt.size() && std::string_view("-+ 0#.123456789").find(fmt[j]) != std::string_view::npos) ++j;
    if (j >= fmt.size()) throw EvalError("incomplete format");
    const char conv = fmt[j];
    const std::string spec = fmt.substr(i, j - i);
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= a.positional.size()) throw EvalError("not enough arguments for format string");
    const Value& v = a.positional[next++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      const std::string text = conv == 's' ? py_str(v) : py_repr(v);
      std::snprintf(buf, sizeof(buf), (spec + "s").c_str(), text.c_str());
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X') {
      if (!v.is_number() && !v.is_bool()) throw EvalError("%d format: a number is required, not " + v.type_name());
      const long long n = v.is_float() ? static_cast<long long>(v.as_double()) : v.as_int();
      std::snprintf(buf, sizeof(buf), (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
    } else if (conv == 'f' || conv == 'e' || conv == 'g') {
      if (!v.is_number() && !v.is_bool()) throw EvalError("must be real number, not " + v.type_name());
      std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v.as_double());
    } else {
      throw EvalError(std::string("unsupported format character '") + conv + "'");
    }
    out += buf;
  }
  if (next < a.positional.size()) throw EvalError("not all arguments converted during string formatting");
  return out;
}

Value filter_tojson(const Value& v, const CallArgs& a) {
  JsonDumpOptions o;
  if (const Value* ind = arg(a, 0, "indent"); ind && !ind->is_none()) {
    // json.dumps accepts a str or an int (bool included); anything else is a TypeError there.
    if (!ind->is_string() && !ind->is_int() && !ind->is_bool()) {
      throw EvalError("tojson: indent must be an int or a str, not '" + ind->type_name() + "'");
    }
    o.indent = ind->is_string() ? ind->as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, ind->as_int())), ' ');
    o.item_separator = ",";  // json.dumps switches to "," when indenting
  }
  if (const Value* asc = arg(a, 1, "ensure_ascii")) o.ensure_ascii = asc->truthy();
  if (const Value* sep = arg(a, 2, "separators"); sep && sep->is_array() && sep->array().items.size() == 2) {
    o.item_separator = py_str(sep->array().items[0]);
    o.key_separator = py_str(sep->array().items[1]);
  }
  if (const Value* sk = arg(a, 3, "sort_keys")) o.sort_keys = sk->truthy();
  return Value(py_json_dumps(v, o));
}

}  // namespace

bool has_filter(std::string_view name) {
  for (std::string_view f : kFilters)
    if (f == name) return true;
  return false;
}

Value apply_filter(std::string_view name, const Value& v, const CallArgs& a, const RenderOptions& limits) {
  Value seq_result;
  if (apply_sequence_filter(name, v, a, limits, seq_result)) return seq_result;
  if (name == "safe" || name == "forceescape") return v;
  if (name == "string") return Value(py_str(v));
  if (name == "trim") {
    const Value* chars = arg(a, 0, "chars");
    std::optional<std::string> set;
    if (chars && chars->is_string()) set = chars->as_string();
    return Value(py_strip(py_str(v), set, true, true));
  }
  if (name == "upper") return Value(py_upper(py_str(v)));
  if (name == "lower") return Value(py_lower(py_str(v)));
  if (name == "capitalize") return Value(py_capitalize(py_str(v)));
  if (name == "title") return Value(filter_title(py_str(v)));
  if (name == "e" || name == "escape") return Value(html_escape(py_str(v)));
  if (name == "default" || name == "d") {
    const Value dflt = arg(a, 0, "default_value") ? *arg(a, 0, "default_value") : Value("");
    const bool boolean = flag(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dflt;
    return v;
  }
  if (name == "replace") {
    const Value* from = arg(a, 0, "old");
    const Value* to = arg(a, 1, "new");
    if (!from || !to) throw EvalError("replace filter needs 'old' and 'new'");
    return Value(check_size(py_replace(py_str(v), py_str(*from), py_str(*to), int_arg(a, 2, "count", -1)), limits));
  }
  if (name == "int") return filter_int(v, a);
  if (name == "float") return filter_float(v, a);
  if (name == "round") return filter_round(v, a);
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_int() || v.is_bool()) return v.as_int() < 0 ? unary_op(Op::kNeg, v) : Value(v.as_int());
    throw EvalError("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "tojson") return filter_tojson(v, a);
  if (name == "indent") return Value(check_size(filter_indent(py_str(v), a), limits));
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    const std::string s = py_str(v);
    for (size_t i = 0; i < s.size();) {
      const char32_t c = utf8_decode(s, i);
      const bool w = py_isalnum(c) || c == '_';
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "center") {
    const int64_t width = int_arg(a, 0, "width", 80);
    const std::string s = py_str(v);
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return Value(s);
    const int64_t total = width - len, left = total / 2 + (total & width & 1);
    return Value(check_size(std::string(left, ' ') + s + std::string(total - left, ' '), limits));
  }
  if (name == "format") return Value(check_size(percent_format(py_str(v), a), limits));
  if (name == "attr") {
    const Value* n = arg(a, 0, "name");
    if (!n || !n->is_string()) throw EvalError("attr filter needs an attribute name");
    // Jinja2's attr() is getattr() only: dict keys are not attributes, namespace fields are.
    if (v.is_object() && v.object().is_namespace) return get_attr(v, n->as_string());
    return Value::undefined("'" + v.type_name() + " object' has no attribute '" + n->as_string() + "'");
  }
  if (name == "pprint") return Value(py_repr(v));
  if (has_filter(name)) throw EvalError("filter '" + std::string(name) + "' is not supported");
  throw EvalError("no filter named '" + std::string(name) + "'");
}

}  // namespace lathe::jinja
