// Jinja parser: tokens -> syntax tree, with Jinja2's operator precedence (filters and tests bind
// tighter than arithmetic: `messages|length - 1` is `(messages|length) - 1`).
#pragma once

#include <string_view>

#include "lathe/io/jinja/ast.h"
#include "lathe/io/jinja/lexer.h"

namespace lathe::jinja {

struct ParseOptions {
  LexOptions lex;
  // Deepest nesting of expressions or blocks accepted; deeper input fails instead of
  // exhausting the stack of the recursive-descent parser (or later, the interpreter).
  int max_nesting_depth = 128;
};

// Throws ChatTemplateError (kSyntax) with the line/column of the offending token, including
// for syntax this interpreter does not support ({% call %}, {% include %}, `recursive` loops...).
Template parse_template(std::string_view source, const ParseOptions& options);

}  // namespace lathe::jinja
