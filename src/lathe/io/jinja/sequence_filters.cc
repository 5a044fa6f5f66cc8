// Jinja filters over sequences and mappings: sorting (case-insensitive by default, as Jinja2),
// map/select with filters and tests, join, first/last, length (see filters.h).
#include "lathe/io/jinja/filters.h"

#include <algorithm>

#include "lathe/io/jinja/operators.h"
#include "lathe/io/jinja/predicates.h"
#include "lathe/io/jinja/py_format.h"
#include "lathe/io/jinja/py_text.h"

namespace lathe::jinja {

namespace {

bool flag(const CallArgs& a, size_t i, std::string_view name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : dflt;
}

const Value* attribute_arg(const CallArgs& a, size_t i) {
  const Value* v = a.get(i, "attribute");
  return v && !v->is_none() ? v : nullptr;
}

Value attribute_of(const Value& item, const Value* attribute) {
  if (!attribute) return item;
  if (attribute->is_int()) return get_item(item, *attribute);
  return attribute_path(item, py_str(*attribute));
}

// Jinja2's ignore_case: strings compare lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(py_lower(v.as_string())) : v;
}

void stable_sort_by_key(std::vector<Value>& items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? compare_values(keys[y], keys[x]) < 0 : compare_values(keys[x], keys[y]) < 0;
  });
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
}

// select/reject/selectattr/rejectattr: positional args from `first_test_arg` are the test name and
// its arguments; no test name means "truthy".
Value select_filter(const Value& input, const CallArgs& a, bool keep_when, const Value* attribute, size_t first_test_arg) {
  std::string test;
  CallArgs test_args;
  if (a.positional.size() > first_test_arg) {
    if (!a.positional[first_test_arg].is_string()) throw EvalError("select: the test name must be a string");
    test = a.positional[first_test_arg].as_string();
    test_args.positional.assign(a.positional.begin() + first_test_arg + 1, a.positional.end());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(input)) {
    const Value subject = attribute_of(item, attribute);
    const bool passed = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (passed == keep_when) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value min_max(const Value& input, const CallArgs& a, bool want_max) {
  const bool case_sensitive = flag(a, 0, "case_sensitive", false);
  const Value* attribute = attribute_arg(a, 1);
  const std::vector<Value> items = iterate(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(attribute_of(items[0], attribute), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(attribute_of(items[i], attribute), case_sensitive);
    const int c = compare_values(key, best_key);
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

}  // namespace

Value attribute_path(const Value& v, std::string_view path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos) {
      cur = get_item(cur, Value(static_cast<int64_t>(std::stoll(part))));
    } else {
      cur = get_item(cur, Value(part));
    }
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

bool apply_sequence_filter(std::string_view name, const Value& v, const CallArgs& a, const RenderOptions& limits,
                           Value& result) {
  if (name == "length" || name == "count") {
    if (v.is_string()) result = Value(static_cast<int64_t>(utf8_length(v.as_string())));
    else if (v.is_array()) result = Value(static_cast<int64_t>(v.array().items.size()));
    else if (v.is_object()) result = Value(static_cast<int64_t>(v.object().entries.size()));
    else if (v.is_undefined()) result = Value(int64_t{0});
    else throw EvalError("object of type '" + v.type_name() + "' has no len()");
  } else if (name == "list") {
    result = Value::list(iterate(v));
  } else if (name == "first" || name == "last") {
    std::vector<Value> items = iterate(v);
    if (items.empty()) result = Value::undefined("No " + std::string(name) + " item, sequence was empty.");
    else result = name == "first" ? items.front() : items.back();
  } else if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> chars = utf8_chars(v.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      result = Value(std::move(out));
    } else {
      std::vector<Value> items = iterate(v);
      std::reverse(items.begin(), items.end());
      result = Value::list(std::move(items));
    }
  } else if (name == "items") {
    std::vector<Value> out;
    if (v.is_object() && !v.object().is_namespace) {
      for (const auto& [k, e] : v.object().entries) out.push_back(Value::tuple({Value(k), e}));
    } else if (!v.is_undefined()) {
      throw EvalError("items filter: can only get item pairs from a mapping, not " + v.type_name());
    }
    result = Value::list(std::move(out));
  } else if (name == "dictsort") {
    if (!v.is_object()) throw EvalError("dictsort needs a mapping, got " + v.type_name());
    const bool case_sensitive = flag(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    const bool by_value = by && by->is_string() && by->as_string() == "value";
    if (by && !(by->is_string() && (by->as_string() == "key" || by->as_string() == "value")))
      throw EvalError("You can only sort by either 'key' or 'value'");
    std::vector<Value> items, keys;
    for (const auto& [k, e] : v.object().entries) {
      items.push_back(Value::tuple({Value(k), e}));
      keys.push_back(sort_key(by_value ? e : Value(k), case_sensitive));
    }
    stable_sort_by_key(items, keys, flag(a, 2, "reverse", false));
    result = Value::list(std::move(items));
  } else if (name == "sort") {
    std::vector<Value> items = iterate(v);
    const bool case_sensitive = flag(a, 1, "case_sensitive", false);
    const Value* attribute = attribute_arg(a, 2);
    std::vector<Value> keys;
    for (const Value& item : items) keys.push_back(sort_key(attribute_of(item, attribute), case_sensitive));
    stable_sort_by_key(items, keys, flag(a, 0, "reverse", false));
    result = Value::list(std::move(items));
  } else if (name == "unique") {
    const bool case_sensitive = flag(a, 0, "case_sensitive", false);
    const Value* attribute = attribute_arg(a, 1);
    std::vector<Value> out, seen;
    for (const Value& item : iterate(v)) {
      Value key = sort_key(attribute_of(item, attribute), case_sensitive);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) continue;
      seen.push_back(std::move(key));
      out.push_back(item);
    }
    result = Value::list(std::move(out));
  } else if (name == "min" || name == "max") {
    result = min_max(v, a, name == "max");
  } else if (name == "sum") {
    const Value* attribute = attribute_arg(a, 0);
    Value total = a.get(1, "start") ? *a.get(1, "start") : Value(int64_t{0});
    for (const Value& item : iterate(v)) total = binary_op(Op::kAdd, total, attribute_of(item, attribute), limits);
    result = total;
  } else if (name == "join") {
    const Value* sep = a.get(0, "d");
    const std::string d = sep ? py_str(*sep) : "";
    const Value* attribute = attribute_arg(a, 1);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      if (!first) out += d;
      out += py_str(attribute_of(item, attribute));
      first = false;
      if (out.size() > limits.max_output_bytes) throw LimitError("string longer than the output limit");
    }
    result = Value(std::move(out));
  } else if (name == "map") {
    std::vector<Value> out;
    if (const Value* attribute = attribute_arg(a, 99)) {
      const Value* dflt = a.get(99, "default");
      for (const Value& item : iterate(v)) {
        Value x = attribute_of(item, attribute);
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
    } else {
      if (a.positional.empty() || !a.positional[0].is_string()) throw EvalError("map needs a filter name or attribute=");
      const std::string filter = a.positional[0].as_string();
      CallArgs fa;
      fa.positional.assign(a.positional.begin() + 1, a.positional.end());
      fa.keyword = a.keyword;
      for (const Value& item : iterate(v)) out.push_back(apply_filter(filter, item, fa, limits));
    }
    result = Value::list(std::move(out));
  } else if (name == "select" || name == "reject") {
    result = select_filter(v, a, name == "select", nullptr, 0);
  } else if (name == "selectattr" || name == "rejectattr") {
    if (a.positional.empty()) throw EvalError(std::string(name) + " needs an attribute name");
    result = select_filter(v, a, name == "selectattr", &a.positional[0], 1);
  } else {
    return false;
  }
  return true;
}

}  // namespace lathe::jinja
