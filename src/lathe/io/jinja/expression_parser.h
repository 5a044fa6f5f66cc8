// Expression half of the parser: Jinja2's precedence climbing (condexpr < or < and < not <
// comparisons < + - < ~ < * / // % < ** < unary < postfix/filters/tests).
#pragma once

#include "lathe/io/jinja/ast.h"
#include "lathe/io/jinja/token_cursor.h"

namespace lathe::jinja {

class ExpressionParser : public TokenCursor {
 public:
  using TokenCursor::TokenCursor;

  // Comma-separated expressions form a tuple (`{% set a, b = 1, 2 %}`).
  ExprPtr parse_tuple(bool with_condexpr);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_filter_chain(ExprPtr input);

 private:
  ExprPtr make(ExprKind kind, size_t offset);
  ExprPtr binary(Op op, ExprPtr a, ExprPtr b, size_t offset);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr literal(Value v, size_t offset);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  std::string parse_filter_name();
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
};

}  // namespace lathe::jinja
