// Python methods templates call on values: str (strip, split, startswith, replace, format, ...)
// and dict (items, keys, values, get). Mutating methods (list.append, dict.update, ...) are
// absent on purpose: transformers renders in Jinja2's ImmutableSandboxedEnvironment, which
// rejects them, so a template using them fails there too.
#pragma once

#include <optional>
#include <string_view>

#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

// Whether `obj.name` names a method (so `obj.name` is a bound method, not a dict key lookup).
bool has_method(const Value& obj, std::string_view name);
// Calls obj.name(args); nullopt when obj has no such method.
std::optional<Value> call_method(const Value& obj, std::string_view name, const CallArgs& args,
                                 const RenderOptions& limits);

}  // namespace lathe::jinja
