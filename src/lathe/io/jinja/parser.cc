// Jinja parser (see parser.h): recursive descent modelled on Jinja2's parser.py.
#include "lathe/io/jinja/parser.h"

#include <algorithm>

#include "lathe/io/jinja/expression_parser.h"

namespace lathe::jinja {

namespace {

using StopSet = std::vector<std::string_view>;

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Template run() {
    Template t;
    t.body = parse_body({}, 0);
    t.source = std::move(source_);
    return t;
  }

 private:
  // Parses until a block tag named in `stop` (left unconsumed) or, when stop is empty, the end.
  Body parse_body(const StopSet& stop, size_t opener_offset) {
    DepthGuard guard(*this, opener_offset);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEof) {
        if (stop.empty()) return body;
        fail("unexpected end of template: block opened here was never closed (expected '" +
                 std::string(stop.back()) + "')", opener_offset);
      }
      if (t.kind == TokenKind::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kText;
        s->offset = t.offset;
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kVarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::kOutput;
        s->offset = next().offset;
        s->expr = parse_tuple(true);
        expect_kind(TokenKind::kVarEnd, "'}}'");
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::kBlockBegin) {
        const Token& name = peek(1);
        if (name.kind == TokenKind::kName && std::find(stop.begin(), stop.end(), name.text) != stop.end())
          return body;
        body.push_back(parse_statement());
      } else {
        fail("unexpected " + describe(t), t.offset);
      }
    }
  }

  // At a {% tag named `name` %}: consumes {% and the name.
  void enter_tag(std::string_view name) {
    ++pos_;
    if (!skip_name(name)) fail("expected '" + std::string(name) + "'", peek().offset);
  }

  std::unique_ptr<Stmt> parse_statement() {
    const size_t offset = next().offset;  // {%
    const Token& name_tok = peek();
    if (name_tok.kind != TokenKind::kName) fail("expected a tag name, got " + describe(name_tok), name_tok.offset);
    const std::string name = next().text;
    auto s = std::make_unique<Stmt>();
    s->offset = offset;
    if (name == "if") {
      s->kind = StmtKind::kIf;
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"}, offset);
      s->branches.emplace_back(std::move(cond), std::move(body));
      while (true) {
        if (at_name("elif", 1)) {
          enter_tag("elif");
          cond = parse_tuple(false);
          expect_block_end();
          body = parse_body({"elif", "else", "endif"}, offset);
          s->branches.emplace_back(std::move(cond), std::move(body));
        } else if (at_name("else", 1)) {
          enter_tag("else");
          expect_block_end();
          s->else_body = parse_body({"endif"}, offset);
          break;
        } else {
          break;
        }
      }
      close_tag("endif");
    } else if (name == "for") {
      s->kind = StmtKind::kFor;
      s->targets = parse_targets();
      if (!skip_name("in")) fail("expected 'in' in for loop, got " + describe(peek()), peek().offset);
      s->expr = parse_tuple(false);
      if (skip_name("if")) s->cond = parse_expression(true);
      if (at_name("recursive")) fail("recursive for loops are not supported", peek().offset);
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, offset);
      --loop_depth_;
      if (at_name("else", 1)) {
        enter_tag("else");
        expect_block_end();
        s->else_body = parse_body({"endfor"}, offset);
      }
      close_tag("endfor");
    } else if (name == "set") {
      parse_set(*s);
    } else if (name == "macro") {
      s->kind = StmtKind::kMacro;
      s->name = expect_name();
      expect_op("(");
      while (!skip_op(")")) {
        if (!s->params.empty()) expect_op(",");
        if (skip_op(")")) break;  // trailing comma
        s->params.push_back(expect_name());
        s->defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
      }
      expect_block_end();
      const int saved_loops = loop_depth_;
      loop_depth_ = 0;  // break/continue cannot cross a macro boundary
      s->body = parse_body({"endmacro"}, offset);
      loop_depth_ = saved_loops;
      close_tag("endmacro");
    } else if (name == "filter") {
      s->kind = StmtKind::kFilterBlock;
      s->expr = parse_filter_chain(nullptr);
      expect_block_end();
      s->body = parse_body({"endfilter"}, offset);
      close_tag("endfilter");
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail("'" + name + "' outside of a for loop", offset);
      s->kind = name == "break" ? StmtKind::kBreak : StmtKind::kContinue;
      expect_block_end();
    } else if (name == "generation") {
      s->kind = StmtKind::kScope;
      expect_block_end();
      s->body = parse_body({"endgeneration"}, offset);
      close_tag("endgeneration");
    } else {
      static const StopSet kEnds = {"elif", "else", "endif", "endfor", "endset", "endmacro", "endfilter",
                                    "endgeneration"};
      if (std::find(kEnds.begin(), kEnds.end(), name) != kEnds.end())
        fail("unexpected '" + name + "' without a matching opening tag", name_tok.offset);
      fail("unsupported tag '" + name + "'", name_tok.offset);
    }
    return s;
  }

  void close_tag(std::string_view name) {
    enter_tag(name);
    expect_block_end();
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool parens = skip_op("(");
    do {
      if (parens && at_op(")")) break;
      names.push_back(expect_name());
    } while (skip_op(","));
    if (parens) expect_op(")");
    return names;
  }

  void parse_set(Stmt& s) {
    const size_t target_offset = peek().offset;
    s.targets = parse_targets();
    if (skip_op(".")) {
      if (s.targets.size() != 1) fail("cannot assign an attribute of a tuple", target_offset);
      s.attr = expect_name();
    }
    if (skip_op("=")) {
      s.kind = StmtKind::kSet;
      s.expr = parse_tuple(true);
      expect_block_end();
      return;
    }
    if (s.targets.size() != 1 || !s.attr.empty()) fail("a block set assigns one plain name", target_offset);
    s.kind = StmtKind::kSetBlock;
    if (at_op("|")) s.expr = parse_filter_chain(nullptr);
    expect_block_end();
    s.body = parse_body({"endset"}, s.offset);
    close_tag("endset");
  }

  int loop_depth_ = 0;
};

}  // namespace

Template parse_template(std::string_view source, const ParseOptions& options) {
  return Parser(lex(source, options.lex), options).run();
}

}  // namespace lathe::jinja
