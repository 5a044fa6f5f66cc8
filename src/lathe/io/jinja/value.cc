// Jinja value model (see value.h).
#include "lathe/io/jinja/value.h"

#include <algorithm>

#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

// Recursive walks (conversion, equality) stop here: inputs or a namespace holding itself could
// otherwise overflow the stack.
constexpr int kMaxValueDepth = 512;

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxValueDepth) throw EvalError("input JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::dict();
      for (const auto& [k, e] : j.items()) d.object().entries.emplace_back(k, from_json_at(e, depth + 1));
      return d;
    }
    default:
      throw EvalError("unsupported JSON value (binary or discarded) in the template context");
  }
}

bool equal_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) throw EvalError("value nested too deeply to compare");
  const bool a_num = a.is_number() || a.is_bool(), b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kArray: {
      const auto& x = a.array().items;
      const auto& y = b.array().items;
      if (x.size() != y.size() || a.array().is_tuple != b.array().is_tuple) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal_at(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::kObject: {
      const auto& x = a.object();
      const auto& y = b.object();
      if (x.is_namespace || y.is_namespace) return &x == &y;  // namespaces compare by identity
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equal_at(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

}  // namespace

Value Value::list(std::vector<Value> items) {
  auto box = std::make_shared<ArrayBox>();
  box->items = std::move(items);
  return Value(std::move(box));
}

Value Value::tuple(std::vector<Value> items) {
  Value v = list(std::move(items));
  v.array().is_tuple = true;
  return v;
}

Value Value::dict() { return Value(std::make_shared<ObjectBox>()); }

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_double() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kArray:
      return !array().items.empty();
    case Kind::kObject:
      return object().is_namespace || !object().entries.empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return array().is_tuple ? "tuple" : "list";
    case Kind::kObject: return object().is_namespace ? "Namespace" : "dict";
    default: return "function";
  }
}

const Value* ObjectBox::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void ObjectBox::set(const std::string& key, Value v) {
  for (auto& [k, old] : entries) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  entries.emplace_back(key, std::move(v));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return nullptr;
}

void CallArgs::check(std::string_view fn, const std::vector<std::string_view>& names) const {
  if (positional.size() > names.size())
    throw EvalError(std::string(fn) + "() takes at most " + std::to_string(names.size()) +
                    " arguments (" + std::to_string(positional.size()) + " given)");
  for (const auto& [k, v] : keyword) {
    const auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end())
      throw EvalError(std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    if (static_cast<size_t>(it - names.begin()) < positional.size())
      throw EvalError(std::string(fn) + "() got multiple values for argument '" + k + "'");
  }
}

bool values_equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

int compare_values(const Value& a, const Value& b) {
  const bool a_num = a.is_number() || a.is_bool(), b_num = b.is_number() || b.is_bool();
  if (a_num && b_num) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 equals code point order, which is Python's str order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array()) {
    const auto& x = a.array().items;
    const auto& y = b.array().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw EvalError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                  b.type_name() + "'");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kArray:
      return v.array().items;
    case Value::Kind::kObject: {
      if (v.object().is_namespace) break;
      std::vector<Value> keys;
      for (const auto& [k, e] : v.object().entries) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string& c : utf8_chars(v.as_string())) chars.emplace_back(std::move(c));
      return chars;
    }
    default:
      break;
  }
  throw EvalError("'" + v.type_name() + "' object is not iterable");
}

}  // namespace lathe::jinja
