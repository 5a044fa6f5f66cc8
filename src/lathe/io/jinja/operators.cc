// Python operator semantics (see operators.h). Integers are int64: where Python would grow a
// big integer we fail instead of printing a wrong number.
#include "lathe/io/jinja/operators.h"

#include <cmath>

#include "lathe/io/jinja/py_format.h"
#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw EvalError(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                  b.type_name() + "'");
}

void check_string(size_t size, const RenderOptions& limits) {
  if (size > limits.max_output_bytes)
    throw LimitError("string longer than the output limit (" + std::to_string(limits.max_output_bytes) + " bytes)");
}

void check_items(size_t n, const RenderOptions& limits) {
  if (n > limits.max_items) throw LimitError("list longer than the limit (" + std::to_string(limits.max_items) + " items)");
}

[[noreturn]] void overflow() { throw EvalError("integer overflow (values beyond 64 bits are not supported)"); }

int64_t checked_add(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) overflow();
  return r;
}
int64_t checked_sub(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) overflow();
  return r;
}
int64_t checked_mul(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) overflow();
  return r;
}

Value repeat(const Value& seq, int64_t n, const RenderOptions& limits) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > limits.max_output_bytes / s.size() + 1)
      check_string(limits.max_output_bytes + 1, limits);
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += s;
    check_string(out.size(), limits);
    return Value(std::move(out));
  }
  const auto& items = seq.array().items;
  if (!items.empty() && static_cast<uint64_t>(n) > limits.max_items / items.size() + 1) check_items(limits.max_items + 1, limits);
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  check_items(out.size(), limits);
  return seq.array().is_tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;  // Python: the result takes the divisor's sign
  return m;
}

Value arithmetic(Op op, const Value& a, const Value& b, const RenderOptions& limits) {
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
  const double fx = a.as_double(), fy = b.as_double();
  switch (op) {
    case Op::kAdd: return ints ? Value(checked_add(x, y)) : Value(fx + fy);
    case Op::kSub: return ints ? Value(checked_sub(x, y)) : Value(fx - fy);
    case Op::kMul: return ints ? Value(checked_mul(x, y)) : Value(fx * fy);
    case Op::kDiv:
      if (fy == 0) throw EvalError("division by zero");
      return Value(fx / fy);
    case Op::kFloorDiv:
      if (ints ? y == 0 : fy == 0) throw EvalError("integer division or modulo by zero");
      if (ints) {
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value(q);
      }
      return Value(std::floor(fx / fy));
    case Op::kMod:
      if (ints ? y == 0 : fy == 0) throw EvalError("integer division or modulo by zero");
      if (ints) {
        if (y == -1) return Value(int64_t{0});
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value(m);
      }
      return Value(float_mod(fx, fy));
    case Op::kPow:
      if (ints && y >= 0) {
        int64_t acc = 1;
        for (int64_t i = 0; i < y; ++i) {
          acc = checked_mul(acc, x);
          if (acc == 0 || acc == 1) break;  // 0**n, 1**n
        }
        if (acc == 1 && x == -1 && (y % 2)) acc = -1;
        return Value(acc);
      }
      if (fx == 0 && fy < 0) throw EvalError("0.0 cannot be raised to a negative power");
      (void)limits;
      return Value(std::pow(fx, fy));
    default: break;
  }
  throw EvalError("bad arithmetic operator");
}

}  // namespace

void throw_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  throw EvalError(hint.empty() ? std::string("value is undefined") : hint);
}

Value binary_op(Op op, const Value& a, const Value& b, const RenderOptions& limits) {
  switch (op) {
    case Op::kConcat: {
      std::string s = py_str(a) + py_str(b);
      check_string(s.size(), limits);
      return Value(std::move(s));
    }
    case Op::kEq: return Value(values_equal(a, b));
    case Op::kNe: return Value(!values_equal(a, b));
    case Op::kLt: return Value(compare_values(a, b) < 0);
    case Op::kLe: return Value(compare_values(a, b) <= 0);
    case Op::kGt: return Value(compare_values(a, b) > 0);
    case Op::kGe: return Value(compare_values(a, b) >= 0);
    case Op::kIn: return Value(contains(b, a));
    case Op::kNotIn: return Value(!contains(b, a));
    default: break;
  }
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  static const char* const kNames[] = {"", "+", "-", "*", "/", "//", "%", "**"};
  const char* name = static_cast<int>(op) < 8 ? kNames[static_cast<int>(op)] : "?";
  if (numeric(a) && numeric(b)) return arithmetic(op, a, b, limits);
  if (op == Op::kAdd && a.is_string() && b.is_string()) {
    check_string(a.as_string().size() + b.as_string().size(), limits);
    return Value(a.as_string() + b.as_string());
  }
  if (op == Op::kAdd && a.is_array() && b.is_array() && a.array().is_tuple == b.array().is_tuple) {
    check_items(a.array().items.size() + b.array().items.size(), limits);
    std::vector<Value> items = a.array().items;
    items.insert(items.end(), b.array().items.begin(), b.array().items.end());
    return a.array().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
  }
  if (op == Op::kMul) {
    if ((a.is_string() || a.is_array()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int(), limits);
    if ((b.is_string() || b.is_array()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int(), limits);
  }
  unsupported(name, a, b);
}

Value unary_op(Op op, const Value& a) {
  if (op == Op::kNot) return Value(!a.truthy());
  if (a.is_undefined()) throw_undefined(a);
  if (!numeric(a)) throw EvalError("bad operand type for unary " + std::string(op == Op::kNeg ? "-" : "+") + ": '" + a.type_name() + "'");
  if (op == Op::kPos) return a.is_float() ? a : Value(a.as_int());
  if (a.is_float()) return Value(-a.as_double());
  if (a.as_int() == INT64_MIN) overflow();
  return Value(-a.as_int());
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!item.is_string()) throw EvalError("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kArray:
      for (const Value& v : container.array().items)
        if (values_equal(v, item)) return true;
      return false;
    case Value::Kind::kObject:
      return item.is_string() && container.object().find(item.as_string()) != nullptr;
    default:
      throw EvalError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  if ((obj.is_array() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_array()) {
      const auto n = static_cast<int64_t>(obj.array().items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(obj.type_name() + " object has no element " + std::to_string(key.as_int()));
      return obj.array().items[i];
    }
    std::vector<std::string> chars = utf8_chars(obj.as_string());
    const auto n = static_cast<int64_t>(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("str object has no element " + std::to_string(key.as_int()));
    return Value(std::move(chars[i]));
  }
  if (obj.is_object() && key.is_string()) {
    if (const Value* v = obj.object().find(key.as_string())) return *v;
    return Value::undefined("'dict object' has no attribute '" + key.as_string() + "'");
  }
  return Value::undefined("'" + obj.type_name() + " object' has no element " + py_repr(key));
}

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (obj.is_object()) {
    if (const Value* v = obj.object().find(name)) return *v;
    return Value::undefined("'" + std::string(obj.object().is_namespace ? "Namespace" : "dict") +
                            " object' has no attribute '" + std::string(name) + "'");
  }
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + std::string(name) + "'");
}

Value slice(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (!obj.is_array() && !obj.is_string()) throw EvalError("'" + obj.type_name() + "' object is not subscriptable");
  const int64_t st = step.value_or(1);
  if (st == 0) throw EvalError("slice step cannot be zero");
  std::vector<std::string> chars;
  if (obj.is_string()) chars = utf8_chars(obj.as_string());
  const auto n = static_cast<int64_t>(obj.is_string() ? chars.size() : obj.array().items.size());
  // PySlice_AdjustIndices: clamp into [0, n] for positive steps, [-1, n-1] for negative ones.
  auto adjust = [&](const std::optional<int64_t>& v, int64_t dflt) {
    if (!v) return dflt;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t b = adjust(start, st < 0 ? n - 1 : 0);
  const int64_t e = adjust(stop, st < 0 ? -1 : n);
  std::string s;
  std::vector<Value> items;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is_string()) s += chars[i];
    else items.push_back(obj.array().items[i]);
  }
  if (obj.is_string()) return Value(std::move(s));
  return obj.array().is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

}  // namespace lathe::jinja
