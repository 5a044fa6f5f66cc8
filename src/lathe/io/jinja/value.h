// The Jinja value model: Python's types as templates see them (undefined, None, bool, int, float,
// str, list/tuple, dict/namespace, callables). Lists and dicts are shared by reference, as in
// Python; inputs arrive as nlohmann::ordered_json so dict key order is the insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::jinja {

// An error without a template position (thrown by values, filters, methods); the interpreter
// catches it at the expression being evaluated and rethrows it as ChatTemplateError with line/column.
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// raise_exception(msg) from the template: the conversation is invalid (user-facing message).
class RaisedError : public EvalError {
 public:
  using EvalError::EvalError;
};
// A render limit (output size, iterations, recursion depth) was reached.
class LimitError : public EvalError {
 public:
  using EvalError::EvalError;
};

class Value;
struct ArrayBox;
struct ObjectBox;
struct Callable;
using ArrayPtr = std::shared_ptr<ArrayBox>;
using ObjectPtr = std::shared_ptr<ObjectBox>;
using CallablePtr = std::shared_ptr<const Callable>;

// Jinja's default Undefined: prints as "", is falsy and iterates as empty, but any attribute access
// or arithmetic on it fails. `hint` names what was missing, for that error message.
struct Undefined {
  std::string hint;
};
struct NoneTag {};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable, kCount };

  Value() = default;  // undefined
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(NoneTag{}); }
  Value(bool b) : v_(b) {}                                       // NOLINT: implicit like Python
  Value(int64_t i) : v_(i) {}                                    // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}                  // NOLINT
  Value(double d) : v_(d) {}                                     // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                     // NOLINT
  Value(const char* s) : v_(std::string(s)) {}                   // NOLINT
  Value(ArrayPtr a) : v_(std::move(a)) {}                        // NOLINT
  Value(ObjectPtr o) : v_(std::move(o)) {}                       // NOLINT
  Value(CallablePtr c) : v_(std::move(c)) {}                     // NOLINT

  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items);
  static Value dict();
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float(); }  // bool excluded; see predicates for Python's view
  bool is_string() const { return kind() == Kind::kString; }
  bool is_array() const { return kind() == Kind::kArray; }
  bool is_object() const { return kind() == Kind::kObject; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(v_); }
  double as_double() const;  // int, float or bool
  const std::string& as_string() const { return std::get<std::string>(v_); }
  ArrayBox& array() const { return *std::get<ArrayPtr>(v_); }
  ObjectBox& object() const { return *std::get<ObjectPtr>(v_); }
  const ObjectPtr& object_ptr() const { return std::get<ObjectPtr>(v_); }
  const Callable& callable() const { return *std::get<CallablePtr>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  bool truthy() const;
  // Python type name for error messages ("str", "int", "list", "dict", "NoneType", ...).
  std::string type_name() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(NoneTag n) : v_(n) {}
  std::variant<Undefined, NoneTag, bool, int64_t, double, std::string, ArrayPtr, ObjectPtr, CallablePtr> v_;
};

struct ArrayBox {
  std::vector<Value> items;
  bool is_tuple = false;  // only changes how it prints: (1, 2) vs [1, 2]
};

// A dict (string keys, insertion order) or a namespace() object, the only kind whose attributes a
// template may assign (`set ns.x = ...`).
struct ObjectBox {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;

  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Python-style binding: argument `index` by position, else by keyword `name`, else nullptr.
  const Value* get(size_t index, std::string_view name) const;
  // Fails when more positional arguments or unknown keywords were given than `names` declares.
  void check(std::string_view fn, const std::vector<std::string_view>& names) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> fn;
};

// Python's ==: deep, numeric across int/float/bool, undefined equals only undefined.
bool values_equal(const Value& a, const Value& b);
// Python's <, for numbers, strings and lists; other pairs throw EvalError. Returns -1, 0, 1.
int compare_values(const Value& a, const Value& b);

// Items a `for` loop visits: list items, dict keys, string characters; undefined is empty.
std::vector<Value> iterate(const Value& v);

}  // namespace lathe::jinja
