// Jinja tests (`x is defined`, `n is divisibleby 3`, ...), with Jinja2's Python semantics: a
// string is a sequence and iterable, a bool is a number but not an integer.
#pragma once

#include <string_view>

#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

bool has_test(std::string_view name);
// args.positional are the test's arguments after the tested value. Throws EvalError for an
// unknown test or bad arguments.
bool apply_test(std::string_view name, const Value& v, const CallArgs& args);

}  // namespace lathe::jinja
