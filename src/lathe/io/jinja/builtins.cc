// Global functions (see builtins.h).
#include "lathe/io/jinja/builtins.h"

#include <ctime>

#include "lathe/io/jinja/py_format.h"

namespace lathe::jinja {

namespace {

Value make_callable(std::string name, std::function<Value(const CallArgs&)> fn) {
  return Value(std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}));
}

int64_t int_of(const Value& v) {
  if (!v.is_int() && !v.is_bool()) throw EvalError("'" + v.type_name() + "' object cannot be interpreted as an integer");
  return v.as_int();
}

Value range_fn(const CallArgs& a, const RenderOptions& limits) {
  if (!a.keyword.empty()) throw EvalError("range() takes no keyword arguments");
  const auto& p = a.positional;
  if (p.empty() || p.size() > 3) throw EvalError("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  const int64_t start = p.size() == 1 ? 0 : int_of(p[0]);
  const int64_t stop = p.size() == 1 ? int_of(p[0]) : int_of(p[1]);
  const int64_t step = p.size() == 3 ? int_of(p[2]) : 1;
  if (step == 0) throw EvalError("range() arg 3 must not be zero");
  // Count first, in 128-bit arithmetic, so range(10**18) fails fast instead of allocating.
  const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 n = span <= 0 ? 0 : (span + (step > 0 ? step : -static_cast<__int128>(step)) - 1) /
                                         (step > 0 ? step : -static_cast<__int128>(step));
  if (n > static_cast<__int128>(limits.max_items))
    throw LimitError("range() longer than the limit (" + std::to_string(limits.max_items) + " items)");
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  for (int64_t i = 0, x = start; i < static_cast<int64_t>(n); ++i, x += step) items.emplace_back(x);
  return Value::list(std::move(items));
}

Value namespace_fn(const CallArgs& a, std::vector<ObjectPtr>* registry) {
  Value ns = Value::dict();
  ns.object().is_namespace = true;
  for (const Value& init : a.positional) {  // namespace(dict) copies the dict's items
    if (!init.is_object()) throw EvalError("namespace() positional argument must be a mapping");
    for (const auto& [k, v] : init.object().entries) ns.object().set(k, v);
  }
  for (const auto& [k, v] : a.keyword) ns.object().set(k, v);
  if (registry) registry->push_back(ns.object_ptr());
  return ns;
}

Value strftime_fn(const CallArgs& a, const RenderOptions& options) {
  const Value* fmt = a.get(0, "format");
  if (!fmt || !fmt->is_string()) throw EvalError("strftime_now() needs a format string");
  const std::time_t now = options.now ? *options.now : std::time(nullptr);
  std::tm tm_buf{};
  localtime_r(&now, &tm_buf);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), fmt->as_string().c_str(), &tm_buf);
  if (n == 0 && !fmt->as_string().empty()) throw EvalError("strftime_now(): format too long or empty result");
  return Value(std::string(buf, n));
}

}  // namespace

Value lookup_builtin(std::string_view name, const BuiltinEnv& env) {
  if (name == "range")
    return make_callable("range", [&env](const CallArgs& a) { return range_fn(a, *env.options); });
  if (name == "namespace")
    return make_callable("namespace", [&env](const CallArgs& a) { return namespace_fn(a, env.namespaces); });
  if (name == "dict")
    return make_callable("dict", [](const CallArgs& a) {
      if (!a.positional.empty()) throw EvalError("dict() in templates takes keyword arguments only");
      Value d = Value::dict();
      for (const auto& [k, v] : a.keyword) d.object().set(k, v);
      return d;
    });
  if (name == "raise_exception")
    return make_callable("raise_exception", [](const CallArgs& a) -> Value {
      const Value* msg = a.get(0, "message");
      throw RaisedError(msg ? py_str(*msg) : std::string("raise_exception() called"));
    });
  if (name == "strftime_now")
    return make_callable("strftime_now", [&env](const CallArgs& a) { return strftime_fn(a, *env.options); });
  return Value::undefined("'" + std::string(name) + "' is undefined");
}

}  // namespace lathe::jinja
