// Parser tests: tree shape and precedence, and syntax errors (including unsupported syntax)
// reported with the template line and column.
#include "lathe/io/jinja/parser.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {
namespace {

const Expr& output_expr(const Template& t, size_t i = 0) {
  EXPECT_GT(t.body.size(), i);
  EXPECT_EQ(t.body[i]->kind, StmtKind::kOutput);
  return *t.body[i]->expr;
}

TEST(Parser, FilterBindsTighterThanMinus) {
  const Template t = parse_template("{{ messages|length - 1 }}", ParseOptions{});
  const Expr& e = output_expr(t);
  ASSERT_EQ(e.kind, ExprKind::kBinary);
  EXPECT_EQ(e.op, Op::kSub);
  EXPECT_EQ(e.args[0]->kind, ExprKind::kFilter);
  EXPECT_EQ(e.args[0]->name, "length");
}

TEST(Parser, ConditionalAndTestsAndCalls) {
  const Template t = parse_template("{{ a.b(1, k=2)[0] if x is not divisibleby 3 else 'n' }}", ParseOptions{});
  const Expr& e = output_expr(t);
  ASSERT_EQ(e.kind, ExprKind::kCondExpr);
  const Expr& test = *e.args[1];
  EXPECT_EQ(test.kind, ExprKind::kTest);
  EXPECT_TRUE(test.negated);
  EXPECT_EQ(test.name, "divisibleby");
  ASSERT_EQ(test.args.size(), 2u);
  const Expr& item = *e.args[0];
  ASSERT_EQ(item.kind, ExprKind::kGetItem);
  const Expr& call = *item.args[0];
  ASSERT_EQ(call.kind, ExprKind::kCall);
  EXPECT_EQ(call.args.size(), 2u);  // callee + one positional
  ASSERT_EQ(call.kwargs.size(), 1u);
  EXPECT_EQ(call.kwargs[0].first, "k");
}

TEST(Parser, ChainedComparisonAndNotIn) {
  const Template t = parse_template("{{ 1 < x <= 3 }}{{ a not in b }}", ParseOptions{});
  const Expr& chain = output_expr(t, 0);
  ASSERT_EQ(chain.kind, ExprKind::kCompare);
  EXPECT_EQ(chain.ops, (std::vector<Op>{Op::kLt, Op::kLe}));
  EXPECT_EQ(output_expr(t, 1).ops, (std::vector<Op>{Op::kNotIn}));
}

TEST(Parser, StatementsBuildTheirParts) {
  const Template t = parse_template(
      "{% for k, v in d|items if v %}{% break %}{% else %}e{% endfor %}"
      "{% macro m(a, b=2) %}{% endmacro %}{% set ns.x = 1 %}{% set y | trim %}z{% endset %}",
      ParseOptions{});
  ASSERT_EQ(t.body.size(), 4u);
  const Stmt& loop = *t.body[0];
  EXPECT_EQ(loop.kind, StmtKind::kFor);
  EXPECT_EQ(loop.targets, (std::vector<std::string>{"k", "v"}));
  EXPECT_TRUE(loop.cond != nullptr);
  EXPECT_EQ(loop.body[0]->kind, StmtKind::kBreak);
  EXPECT_EQ(loop.else_body.size(), 1u);
  const Stmt& macro = *t.body[1];
  EXPECT_EQ(macro.params, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(macro.defaults[0] == nullptr);
  EXPECT_TRUE(macro.defaults[1] != nullptr);
  EXPECT_EQ(t.body[2]->attr, "x");
  EXPECT_EQ(t.body[3]->kind, StmtKind::kSetBlock);
}

TEST(Parser, SyntaxErrorsGiveLineAndColumn) {
  struct Bad {
    const char* source;
    int line, column;
    const char* fragment;
  };
  const Bad cases[] = {
      {"{% if x %}\nunterminated", 1, 1, "never closed"},
      {"a\n{% endfor %}", 2, 4, "without a matching"},
      {"{% for x in y %}\n  {% include 'x.j2' %}\n{% endfor %}", 2, 6, "unsupported tag 'include'"},
      {"{% call foo() %}{% endcall %}", 1, 4, "unsupported tag 'call'"},
      {"{% for x in y recursive %}{% endfor %}", 1, 15, "recursive"},
      {"{{ 1 + }}", 1, 8, "unexpected '}}'"},
      {"{{ f(*args) }}", 1, 6, "*args"},
      {"x\n\n   {{ (1, 2 }}", 3, 13, "expected ')'"},
      {"{% break %}", 1, 1, "outside of a for loop"},
      {"{% set a.b.c = 1 %}", 1, 8, "a block set assigns one plain name"},
      {"{{ x is defined is defined }}", 1, 17, "tests cannot be chained"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.source);
    try {
      parse_template(b.source, ParseOptions{});
      ADD_FAILURE() << "no error";
    } catch (const ChatTemplateError& e) {
      EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kSyntax);
      EXPECT_EQ(e.line(), b.line) << e.what();
      EXPECT_EQ(e.column(), b.column) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.fragment), std::string::npos) << e.what();
    }
  }
}

TEST(Parser, DeepNestingFailsInsteadOfOverflowing) {
  std::string deep(5000, '(');
  deep = "{{ " + deep + "1" + std::string(5000, ')') + " }}";
  try {
    parse_template(deep, ParseOptions{});
    FAIL() << "no error";
  } catch (const ChatTemplateError& e) {
    EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
  }
  std::string blocks;
  for (int i = 0; i < 1000; ++i) blocks += "{% if x %}";
  EXPECT_THROW(parse_template(blocks, ParseOptions{}), ChatTemplateError);
}

// Fuzz finding: left-associative chains parse without recursion but nest the tree one level per link,
// so `1+1+...` (or x.a.a..., x[0][0]..., x|e|e...) of ~20000 links overflowed the interpreter's stack.
TEST(Parser, LongChainsFailInsteadOfOverflowing) {
  for (const char* link : {"+1", "~1", " and 1", "*1", "**1", ".a", "[0]", "(1)", "|e", " if 1 else 1"}) {
    SCOPED_TRACE(link);
    std::string src = "{{ x";
    for (int i = 0; i < 20000; ++i) src += link;
    src += " }}";
    try {
      parse_template(src, ParseOptions{});
      FAIL() << "no error";
    } catch (const ChatTemplateError& e) {
      EXPECT_NE(std::string(e.what()).find("nested too deeply"), std::string::npos) << e.what();
    }
  }
  // Ordinary chains still parse.
  EXPECT_NO_THROW(parse_template("{{ a + b + c ~ d ~ e | lower | trim | upper if x.y.z[0](1) is defined else g }}", ParseOptions{}));
}

TEST(Parser, ColumnsCountCodePoints) {
  try {
    parse_template("éé {{ ) }}", ParseOptions{});
    FAIL() << "no error";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), 7);
  }
}

}  // namespace
}  // namespace lathe::jinja
