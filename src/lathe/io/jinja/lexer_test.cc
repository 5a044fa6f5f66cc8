// Lexer tests: whitespace control as transformers configures Jinja2 (trim_blocks, lstrip_blocks,
// -/+ modifiers), comments, raw blocks, literals, and token positions / lexing errors.
#include "lathe/io/jinja/lexer.h"

#include <gtest/gtest.h>

#include "lathe/io/jinja/render_case_test_util.h"

namespace lathe::jinja {
namespace {

using testing_util::RenderCase;

const RenderCase kWhitespaceCases[] = {
    {"trim_blocks_drops_newline_after_block", R"J({% if true %}
yes
{% endif %}
end)J",
     R"J({})J",
     R"J(yes
end)J"},
    {"lstrip_blocks_strips_indent_before_block", R"J(a
    {% if true %}
    b
    {% endif %}
c)J",
     R"J({})J",
     R"J(a
    b
c)J"},
    {"lstrip_not_after_text_on_same_line", R"J(x  {% if true %}y{% endif %})J",
     R"J({})J",
     R"J(x  y)J"},
    {"variable_tags_are_not_trimmed", R"J(  {{ 1 }}
{{ 2 }}
)J",
     R"J({})J",
     R"J(  1
2)J"},
    {"minus_strips_both_sides", "a  \n  {%- if true -%}  \n  b  \n  {%- endif -%}  \n  c",
     R"J({})J",
     R"J(abc)J"},
    {"minus_on_variables", "a \n {{- 'b' -}} \n c",
     R"J({})J",
     R"J(abc)J"},
    {"plus_disables_lstrip", R"J(a
    {%+ if true %}b{% endif %})J",
     R"J({})J",
     R"J(a
    b)J"},
    {"comment_is_removed_and_trims", R"J(a
  {# note #}
b{#- x -#}  c)J",
     R"J({})J",
     R"J(a
bc)J"},
    {"raw_block_is_verbatim", R"J({% raw %}{{ not parsed }} {% if %}{% endraw %}!)J",
     R"J({})J",
     R"J({{ not parsed }} {% if %}!)J"},
    {"crlf_newlines_normalised", "a\r\nb\rc",
     R"J({})J",
     R"J(a
b
c)J"},
    {"one_trailing_newline_dropped", R"J(line

)J",
     R"J({})J",
     R"J(line
)J"},
    {"string_escapes", R"J({{ 'a\tb\n\'q\' \u00e9\x41 \\ \q' }}|{{ "dq\"" }})J",
     R"J({})J",
     "a\tb\n'q' éA \\ \\q|dq\""},
    {"adjacent_strings_concatenate", R"J({{ 'a' "b" 'c' }})J",
     R"J({})J",
     R"J(abc)J"},
    {"numbers", R"J({{ 1_000 }} {{ 1e3 }} {{ 2.5e-1 }} {{ 0.1 }})J",
     R"J({})J",
     R"J(1000 1000.0 0.25 0.1)J"},
    {"braces_in_text_are_text", R"J({ x } {a} }} %} #})J",
     R"J({})J",
     R"J({ x } {a} }} %} #})J"},
    {"tag_spanning_lines", R"J({{
  1 +
  2
}})J",
     R"J({})J",
     R"J(3)J"},
};

TEST(Lexer, WhitespaceControlAndLiteralsMatchJinja2) { testing_util::expect_renders(kWhitespaceCases); }

TEST(Lexer, TokensCarryKindsTextAndOffsets) {
  const LexedTemplate t = lex("ab{{ x.y|f(1, 'q') }}", LexOptions{});
  std::vector<TokenKind> kinds;
  for (const Token& tok : t.tokens) kinds.push_back(tok.kind);
  const std::vector<TokenKind> expected = {
      TokenKind::kText,     TokenKind::kVarBegin, TokenKind::kName,     TokenKind::kOperator, TokenKind::kName,
      TokenKind::kOperator, TokenKind::kName,     TokenKind::kOperator, TokenKind::kInt,      TokenKind::kOperator,
      TokenKind::kString,   TokenKind::kOperator, TokenKind::kVarEnd,   TokenKind::kEof};
  EXPECT_EQ(kinds, expected);
  EXPECT_EQ(t.tokens[0].text, "ab");
  EXPECT_EQ(t.tokens[2].offset, 5u);  // x
  EXPECT_EQ(t.tokens[8].int_value, 1);
  EXPECT_EQ(t.tokens[10].text, "q");
}

TEST(Lexer, OptionsCanTurnTrimmingOff) {
  LexOptions plain;
  plain.trim_blocks = false;
  plain.lstrip_blocks = false;
  plain.keep_trailing_newline = true;
  const LexedTemplate t = lex("  {% if x %}\nA\n", plain);
  ASSERT_GE(t.tokens.size(), 3u);
  EXPECT_EQ(t.tokens[0].text, "  ");
  const Token& after = t.tokens[t.tokens.size() - 2];
  EXPECT_EQ(after.text, "\nA\n");
}

TEST(Lexer, ErrorsGiveLineAndColumn) {
  struct Bad {
    const char* source;
    int line, column;
    const char* fragment;
  };
  const Bad cases[] = {
      {"ok\n  {{ x ", 2, 3, "unclosed variable tag"},
      {"{% if x %}\n{# never closed", 2, 1, "unclosed comment"},
      {"{{ 'abc }}", 1, 4, "unterminated string"},
      {"line1\nline2 {{ a $ b }}", 2, 12, "unexpected character '$'"},
      {"{% raw %}abc", 1, 1, "endraw"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.source);
    try {
      lex(b.source, LexOptions{});
      ADD_FAILURE() << "no error";
    } catch (const ChatTemplateError& e) {
      EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kSyntax);
      EXPECT_EQ(e.line(), b.line) << e.what();
      EXPECT_EQ(e.column(), b.column) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.fragment), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lathe::jinja
