// Jinja expression parser (see expression_parser.h), modelled on Jinja2's parser.py.
#include "lathe/io/jinja/expression_parser.h"

#include "lathe/io/jinja/filters.h"
#include "lathe/io/jinja/predicates.h"

namespace lathe::jinja {

ExprPtr ExpressionParser::make(ExprKind kind, size_t offset) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->offset = offset;
  return e;
}

// Comma-separated expressions form a tuple (`{% set a, b = 1, 2 %}`).
ExprPtr ExpressionParser::parse_tuple(bool with_condexpr) {
  const size_t offset = peek().offset;
  ExprPtr first = parse_expression(with_condexpr);
  if (!at_op(",")) return first;
  ExprPtr t = make(ExprKind::kTuple, offset);
  t->args.push_back(std::move(first));
  while (skip_op(",")) {
    if (peek().kind == TokenKind::kVarEnd || peek().kind == TokenKind::kBlockEnd || at_op(")")) break;
    t->args.push_back(parse_expression(with_condexpr));
  }
  return t;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this, peek().offset);
  if (!with_condexpr) return parse_or();
  ExprPtr expr = parse_or();
  ChainGuard chain(*this);
  while (at_name("if")) {
    const size_t offset = next().offset;
    chain.link(offset);
    ExprPtr cond = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_expression(true) : nullptr;
    ExprPtr e = make(ExprKind::kCondExpr, offset);
    e->args.push_back(std::move(expr));
    e->args.push_back(std::move(cond));
    e->args.push_back(std::move(otherwise));
    expr = std::move(e);
  }
  return expr;
}

ExprPtr ExpressionParser::binary(Op op, ExprPtr a, ExprPtr b, size_t offset) {
  ExprPtr e = make(ExprKind::kBinary, offset);
  e->op = op;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  ChainGuard chain(*this);
  while (at_name("or")) {
    const size_t offset = next().offset;
    chain.link(offset);
    left = binary(Op::kOr, std::move(left), parse_and(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  ChainGuard chain(*this);
  while (at_name("and")) {
    const size_t offset = next().offset;
    chain.link(offset);
    left = binary(Op::kAnd, std::move(left), parse_not(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    const size_t offset = next().offset;
    DepthGuard guard(*this, offset);
    ExprPtr e = make(ExprKind::kUnary, offset);
    e->op = Op::kNot;
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const size_t offset = peek().offset;
  ExprPtr first = parse_math1();
  ExprPtr chain;
  while (true) {
    Op op = Op::kNone;
    static const std::pair<std::string_view, Op> kCmp[] = {{"==", Op::kEq}, {"!=", Op::kNe}, {"<", Op::kLt},
                                                           {"<=", Op::kLe}, {">", Op::kGt},  {">=", Op::kGe}};
    for (const auto& [text, o] : kCmp)
      if (at_op(text)) op = o;
    if (op != Op::kNone) {
      ++pos_;
    } else if (at_name("in")) {
      ++pos_;
      op = Op::kIn;
    } else if (at_name("not") && at_name("in", 1)) {
      pos_ += 2;
      op = Op::kNotIn;
    } else {
      break;
    }
    if (!chain) {
      chain = make(ExprKind::kCompare, offset);
      chain->args.push_back(std::move(first));
    }
    chain->ops.push_back(op);
    chain->args.push_back(parse_math1());
  }
  return chain ? std::move(chain) : std::move(first);
}

ExprPtr ExpressionParser::parse_math1() {
  ExprPtr left = parse_concat();
  ChainGuard chain(*this);
  while (at_op("+") || at_op("-")) {
    const Token& t = next();
    chain.link(t.offset);
    left = binary(t.text == "+" ? Op::kAdd : Op::kSub, std::move(left), parse_concat(), t.offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  ExprPtr left = parse_math2();
  ChainGuard chain(*this);
  while (at_op("~")) {
    const size_t offset = next().offset;
    chain.link(offset);
    left = binary(Op::kConcat, std::move(left), parse_math2(), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_math2() {
  ExprPtr left = parse_pow();
  ChainGuard chain(*this);
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const Token& t = next();
    chain.link(t.offset);
    const Op op = t.text == "*" ? Op::kMul : t.text == "/" ? Op::kDiv : t.text == "//" ? Op::kFloorDiv : Op::kMod;
    left = binary(op, std::move(left), parse_pow(), t.offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  ChainGuard chain(*this);
  while (at_op("**")) {
    const size_t offset = next().offset;
    chain.link(offset);
    left = binary(Op::kPow, std::move(left), parse_unary(true), offset);
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  DepthGuard guard(*this, peek().offset);
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    const Token& t = next();
    node = make(ExprKind::kUnary, t.offset);
    node->op = t.text == "-" ? Op::kNeg : Op::kPos;
    node->args.push_back(parse_unary(false));
  } else {
    node = parse_postfix(parse_primary());
  }
  return with_filter ? parse_filter_expr(std::move(node)) : std::move(node);
}

ExprPtr ExpressionParser::literal(Value v, size_t offset) {
  ExprPtr e = make(ExprKind::kLiteral, offset);
  e->literal = std::move(v);
  return e;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& t = peek();
  const size_t offset = t.offset;
  switch (t.kind) {
    case TokenKind::kName: {
      ++pos_;
      if (t.text == "true" || t.text == "True") return literal(Value(true), offset);
      if (t.text == "false" || t.text == "False") return literal(Value(false), offset);
      if (t.text == "none" || t.text == "None") return literal(Value::none(), offset);
      ExprPtr e = make(ExprKind::kName, offset);
      e->name = t.text;
      return e;
    }
    case TokenKind::kString: {
      std::string s;
      while (peek().kind == TokenKind::kString) s += next().text;  // adjacent literals concatenate
      return literal(Value(std::move(s)), offset);
    }
    case TokenKind::kInt: ++pos_; return literal(Value(t.int_value), offset);
    case TokenKind::kFloat: ++pos_; return literal(Value(t.float_value), offset);
    default: break;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return make(ExprKind::kTuple, offset);
    ExprPtr inner = parse_expression(true);
    if (at_op(",")) {
      ExprPtr tup = make(ExprKind::kTuple, offset);
      tup->args.push_back(std::move(inner));
      while (skip_op(",")) {
        if (at_op(")")) break;
        tup->args.push_back(parse_expression(true));
      }
      inner = std::move(tup);
    }
    expect_op(")");
    return inner;
  }
  if (skip_op("[")) {
    ExprPtr list = make(ExprKind::kList, offset);
    while (!skip_op("]")) {
      if (!list->args.empty()) expect_op(",");
      if (skip_op("]")) break;
      list->args.push_back(parse_expression(true));
    }
    return list;
  }
  if (skip_op("{")) {
    ExprPtr dict = make(ExprKind::kDict, offset);
    while (!skip_op("}")) {
      if (!dict->args.empty()) expect_op(",");
      if (skip_op("}")) break;
      dict->args.push_back(parse_expression(true));
      expect_op(":");
      dict->args.push_back(parse_expression(true));
    }
    return dict;
  }
  fail("unexpected " + describe(t), offset);
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    if (at_op(".") || at_op("[") || at_op("(")) chain.link(peek().offset);
    if (at_op(".")) {
      const size_t offset = next().offset;
      if (peek().kind == TokenKind::kInt) {  // foo.0 is foo[0]
        ExprPtr e = make(ExprKind::kGetItem, offset);
        e->args.push_back(std::move(node));
        e->args.push_back(literal(Value(next().int_value), offset));
        node = std::move(e);
        continue;
      }
      ExprPtr e = make(ExprKind::kGetAttr, offset);
      e->name = expect_name();
      e->args.push_back(std::move(node));
      node = std::move(e);
    } else if (at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  const size_t offset = next().offset;  // [
  ExprPtr parts[3];
  int n_colons = 0;
  if (!at_op(":")) parts[0] = parse_expression(true);
  while (n_colons < 2 && skip_op(":")) {
    ++n_colons;
    if (!at_op(":") && !at_op("]")) parts[n_colons] = parse_expression(true);
  }
  if (n_colons == 0 && at_op(",")) fail("tuple subscripts are not supported", peek().offset);
  expect_op("]");
  ExprPtr e = make(n_colons ? ExprKind::kSlice : ExprKind::kGetItem, offset);
  e->args.push_back(std::move(node));
  e->args.push_back(std::move(parts[0]));
  if (n_colons) {
    e->args.push_back(std::move(parts[1]));
    e->args.push_back(std::move(parts[2]));
  }
  return e;
}

// Arguments after '(' into e->args (positional, appended) and e->kwargs.
void ExpressionParser::parse_call_args(Expr& e) {
  expect_op("(");
  bool first = true;
  while (!skip_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (skip_op(")")) break;
    if (at_op("*") || at_op("**")) fail("*args / **kwargs in calls are not supported", peek().offset);
    if (peek().kind == TokenKind::kName && at_op("=", 1)) {
      std::string key = next().text;
      ++pos_;
      e.kwargs.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!e.kwargs.empty()) fail("positional argument follows keyword argument", peek().offset);
      e.args.push_back(parse_expression(true));
    }
  }
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  ExprPtr e = make(ExprKind::kCall, callee->offset);  // errors point at what is called
  e->args.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

std::string ExpressionParser::parse_dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  return name;
}

// Unknown filters and tests fail when parsing, as in Jinja2, even in branches never rendered.
std::string ExpressionParser::parse_filter_name() {
  const size_t offset = peek().offset;
  std::string name = parse_dotted_name();
  if (!has_filter(name)) fail("no filter named '" + name + "'", offset);
  return name;
}

// `| f(args) | g ...` applied to `input` (nullptr for {% filter %} and block set).
ExprPtr ExpressionParser::parse_filter_chain(ExprPtr input) {
  if (!at_op("|") && !input) {
    ExprPtr e = make(ExprKind::kFilter, peek().offset);  // {% filter name %} has no leading pipe
    e->name = parse_filter_name();
    e->args.push_back(nullptr);
    if (at_op("(")) parse_call_args(*e);
    input = std::move(e);
  }
  ChainGuard chain(*this);
  while (at_op("|")) {
    chain.link(peek().offset);
    ExprPtr e = make(ExprKind::kFilter, next().offset);
    e->name = parse_filter_name();
    e->args.push_back(std::move(input));
    if (at_op("(")) parse_call_args(*e);
    input = std::move(e);
  }
  return input;
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  ChainGuard chain(*this);
  while (true) {
    if (at_name("is") || at_op("(")) chain.link(peek().offset);
    if (at_op("|")) {
      node = parse_filter_chain(std::move(node));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
  ExprPtr e = make(ExprKind::kTest, next().offset);  // is
  e->negated = skip_name("not");
  const size_t name_offset = peek().offset;
  e->name = parse_dotted_name();
  if (!has_test(e->name)) fail("no test named '" + e->name + "'", name_offset);
  e->args.push_back(std::move(node));
  const Token& t = peek();
  if (at_op("(")) {
    parse_call_args(*e);
  } else if ((t.kind == TokenKind::kName || t.kind == TokenKind::kString || t.kind == TokenKind::kInt ||
              t.kind == TokenKind::kFloat || at_op("[") || at_op("{")) &&
             !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail("tests cannot be chained with 'is'", t.offset);
    e->args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
  }
  return e;
}

}  // namespace lathe::jinja
