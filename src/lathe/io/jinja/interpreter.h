// Renders a parsed template: Jinja2 scoping (a `for` body gets a fresh scope per iteration, so
// `set` inside a loop is invisible outside; namespace() objects carry state out), macros, loops
// with the `loop` object, break/continue, and the render limits of RenderOptions.
#pragma once

#include <string>

#include "lathe/io/jinja/ast.h"
#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/value.h"

namespace lathe::jinja {

// `context` must be a dict (its keys become the template's variables). Throws ChatTemplateError
// with the line/column of the failing statement or expression.
std::string render_template(const Template& tmpl, const Value& context, const RenderOptions& options);

}  // namespace lathe::jinja
