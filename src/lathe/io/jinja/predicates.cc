// Jinja tests (see predicates.h); the table follows jinja2/tests.py.
#include "lathe/io/jinja/predicates.h"

#include <array>
#include <cmath>

#include "lathe/io/jinja/operators.h"
#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

constexpr std::array<std::string_view, 35> kTests = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number",
    "string", "mapping", "sequence", "iterable", "callable", "sameas", "even", "odd", "divisibleby",
    "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
    "ge", ">=", "in", "lower"};

const Value& arg(const CallArgs& args, std::string_view test, size_t i = 0) {
  if (args.positional.size() <= i) throw EvalError("test '" + std::string(test) + "' needs an argument");
  return args.positional[i];
}

int64_t integer_of(const Value& v, std::string_view test) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float() && std::floor(v.as_double()) == v.as_double()) return static_cast<int64_t>(v.as_double());
  throw EvalError("test '" + std::string(test) + "' needs an integer, got " + v.type_name());
}

}  // namespace

bool has_test(std::string_view name) {
  for (std::string_view t : kTests)
    if (t == name) return true;
  return name == "upper";
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  using K = Value::Kind;
  const K k = v.kind();
  if (name == "defined") return k != K::kUndefined;
  if (name == "undefined") return k == K::kUndefined;
  if (name == "none") return k == K::kNone;
  if (name == "boolean") return k == K::kBool;
  if (name == "false") return k == K::kBool && !v.as_bool();
  if (name == "true") return k == K::kBool && v.as_bool();
  if (name == "integer") return k == K::kInt;
  if (name == "float") return k == K::kFloat;
  if (name == "number") return k == K::kInt || k == K::kFloat || k == K::kBool;  // bool is a Number in Python
  if (name == "string") return k == K::kString;
  if (name == "mapping") return k == K::kObject && !v.object().is_namespace;
  if (name == "sequence") return k == K::kString || k == K::kArray || (k == K::kObject && !v.object().is_namespace);
  if (name == "iterable") return k == K::kString || k == K::kArray || k == K::kUndefined ||
                                 (k == K::kObject && !v.object().is_namespace);
  if (name == "callable") return k == K::kCallable;
  if (name == "sameas") {
    const Value& o = arg(args, name);
    if (k != o.kind()) return false;
    if (k == K::kArray) return &v.array() == &o.array();
    if (k == K::kObject) return &v.object() == &o.object();
    return values_equal(v, o);  // None, bools and small ints are singletons in CPython
  }
  if (name == "even" || name == "odd") {
    const int64_t n = integer_of(v, name);
    return (n % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    const int64_t d = integer_of(arg(args, name), name);
    if (d == 0) throw EvalError("integer division or modulo by zero");
    return integer_of(v, name) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, arg(args, name));
  if (name == "ne" || name == "!=") return !values_equal(v, arg(args, name));
  if (name == "lt" || name == "lessthan" || name == "<") return compare_values(v, arg(args, name)) < 0;
  if (name == "le" || name == "<=") return compare_values(v, arg(args, name)) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare_values(v, arg(args, name)) > 0;
  if (name == "ge" || name == ">=") return compare_values(v, arg(args, name)) >= 0;
  if (name == "in") return contains(arg(args, name), v);
  if (name == "lower" || name == "upper") {
    if (k != K::kString) return false;
    const std::string& s = v.as_string();
    const std::string mapped = name == "lower" ? py_lower(s) : py_upper(s);
    return mapped == s && (name == "lower" ? py_upper(s) : py_lower(s)) != s;
  }
  throw EvalError("unknown test '" + std::string(name) + "'");
}

}  // namespace lathe::jinja
