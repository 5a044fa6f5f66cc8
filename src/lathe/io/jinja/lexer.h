// Jinja lexer: splits a template into text and tag tokens, applying whitespace control as
// transformers configures Jinja2 (trim_blocks, lstrip_blocks, `-`/`+` modifiers, one trailing
// newline of the source dropped, newlines normalised to "\n").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::jinja {

enum class TokenKind : uint8_t {
  kText,        // literal template text (already whitespace-controlled)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword
  kString,      // string literal, unescaped
  kInt,
  kFloat,
  kOperator,    // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEof,
  kCount
};

struct Token {
  TokenKind kind = TokenKind::kEof;
  std::string text;  // text, name, string value or operator spelling
  size_t offset = 0;  // byte offset into the normalised source, for error positions
  int64_t int_value = 0;
  double float_value = 0.0;
};

struct LexOptions {
  bool trim_blocks = true;    // drop the first newline after a block tag (transformers: True)
  bool lstrip_blocks = true;  // strip spaces/tabs before a block tag at line start (transformers: True)
  bool keep_trailing_newline = false;
};

// What the lexer saw: the tokens and the newline-normalised source their offsets refer to.
struct LexedTemplate {
  std::string source;
  std::vector<Token> tokens;  // ends with kEof
};

// Throws ChatTemplateError (kSyntax) with line/column for unclosed tags, bad characters or strings.
LexedTemplate lex(std::string_view source, const LexOptions& options);

}  // namespace lathe::jinja
