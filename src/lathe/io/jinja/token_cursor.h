// Token cursor shared by the statement and expression parsers: lookahead, expectations, syntax
// errors with line/column, and the nesting-depth guard.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/io/jinja/lexer.h"
#include "lathe/io/jinja/parser.h"
#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {

class TokenCursor {
 public:
  TokenCursor(LexedTemplate lexed, const ParseOptions& options)
      : source_(std::move(lexed.source)), toks_(std::move(lexed.tokens)), options_(options) {}

 protected:
  // RAII nesting counter: deep input fails cleanly instead of overflowing the stack.
  struct DepthGuard {
    DepthGuard(TokenCursor& p, size_t offset) : p_(p) {
      if (++p_.depth_ > p_.options_.max_nesting_depth) p_.fail("template nested too deeply", offset);
    }
    ~DepthGuard() { --p_.depth_; }
    TokenCursor& p_;
  };
  // Left-associative chains (a + b + c, x.a.b, x|f|g, x is t is ...) build one tree level per link
  // without recursing in the parser; each link takes one level of the same nesting budget until the
  // chain's function returns, so the tree stays shallow enough for the recursive interpreter and the
  // recursive destructor (a 40 KB `1+1+...` template used to overflow the stack when rendered).
  struct ChainGuard {
    explicit ChainGuard(TokenCursor& p) : p_(p) {}
    void link(size_t offset) {
      ++links_;
      if (++p_.depth_ > p_.options_.max_nesting_depth) p_.fail("template nested too deeply", offset);
    }
    ~ChainGuard() { p_.depth_ -= links_; }
    ChainGuard(const ChainGuard&) = delete;
    ChainGuard& operator=(const ChainGuard&) = delete;
    TokenCursor& p_;
    int links_ = 0;
  };

  [[noreturn]] void fail(const std::string& msg, size_t offset) const {
    const SourcePosition p = locate(source_, offset);
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, msg, p.line, p.column);
  }

  const Token& peek(size_t ahead = 0) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    ++pos_;
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    ++pos_;
    return true;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEof: return "end of template";
      case TokenKind::kVarEnd: return "'}}'";
      case TokenKind::kBlockEnd: return "'%}'";
      case TokenKind::kText: return "template text";
      case TokenKind::kString: return "string literal";
      default: return "'" + t.text + "'";
    }
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(peek()), peek().offset);
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::kName) fail("expected a name, got " + describe(peek()), peek().offset);
    return next().text;
  }
  void expect_kind(TokenKind kind, const char* what) {
    if (peek().kind != kind) fail(std::string("expected ") + what + ", got " + describe(peek()), peek().offset);
    ++pos_;
  }
  void expect_block_end() { expect_kind(TokenKind::kBlockEnd, "'%}'"); }

  std::string source_;
  std::vector<Token> toks_;
  ParseOptions options_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace lathe::jinja
