// Python operator semantics for Jinja expressions: arithmetic (int stays int, `/` gives float,
// `//` and `%` floor), `~` concatenation, comparisons, `in`, subscripts and slices.
#pragma once

#include <optional>
#include <string_view>

#include "lathe/io/jinja/ast.h"
#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

// Arithmetic, `~` and comparison operators (not `and`/`or`, which short-circuit in the
// interpreter). Throws EvalError on type errors and LimitError when a string or list would
// exceed the render limits.
Value binary_op(Op op, const Value& a, const Value& b, const RenderOptions& limits);
Value unary_op(Op op, const Value& a);
bool contains(const Value& container, const Value& item);  // Python `item in container`

// obj[key]; a missing key or index gives undefined (as Jinja's getitem), undefined obj throws.
Value get_item(const Value& obj, const Value& key);
// obj.name: a dict key, else undefined. (Method calls are resolved by the interpreter first.)
Value get_attr(const Value& obj, std::string_view name);
// obj[start:stop:step] with Python's slice rules, for lists, tuples and strings.
Value slice(const Value& obj, const std::optional<int64_t>& start, const std::optional<int64_t>& stop,
            const std::optional<int64_t>& step);

// The error an operation on undefined raises: "'name' is undefined".
[[noreturn]] void throw_undefined(const Value& v);

}  // namespace lathe::jinja
