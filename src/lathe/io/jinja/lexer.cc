// Jinja lexer (see lexer.h). Whitespace rules follow Jinja2's lexer.py: `{%-` rstrips the text
// before, `-%}` lstrips the text after, lstrip_blocks removes blanks between a line start and a
// block/comment tag, trim_blocks removes one newline after a block/comment tag.
#include "lathe/io/jinja/lexer.h"

#include <cctype>
#include <cstring>

#include "lathe/io/jinja/py_text.h"
#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {

namespace {

bool is_tag_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

enum class TagKind : uint8_t { kVar, kBlock, kComment, kCount };

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options) : options_(options) { out_.source = std::move(source); }

  LexedTemplate run() {
    const std::string& s = out_.source;
    while (pos_ < s.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = s.substr(pos_, (tag == std::string::npos ? s.size() : tag) - pos_);
      const size_t text_offset = pos_;
      if (tag == std::string::npos) {
        emit_text(std::move(text), text_offset);
        break;
      }
      const char kind_char = s[tag + 1];
      const TagKind kind = kind_char == '{' ? TagKind::kVar : kind_char == '%' ? TagKind::kBlock : TagKind::kComment;
      const char modifier = tag + 2 < s.size() ? s[tag + 2] : '\0';
      if (modifier == '-') {
        text = py_strip(text, std::nullopt, false, true);
      } else if (modifier != '+' && options_.lstrip_blocks && kind != TagKind::kVar) {
        text = lstrip_line(std::move(text));
      }
      emit_text(std::move(text), text_offset);
      pos_ = tag + 2 + (modifier == '-' || modifier == '+' ? 1 : 0);
      if (kind == TagKind::kComment) {
        lex_comment(tag);
      } else {
        lex_tag(kind, tag);
      }
    }
    out_.tokens.push_back(Token{TokenKind::kEof, "", out_.source.size()});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg, size_t offset) const {
    const SourcePosition p = locate(out_.source, offset);
    throw ChatTemplateError(ChatTemplateError::Kind::kSyntax, msg, p.line, p.column);
  }

  size_t find_tag(size_t from) const {
    const std::string& s = out_.source;
    for (size_t i = s.find('{', from); i != std::string::npos; i = s.find('{', i + 1)) {
      if (i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // lstrip_blocks: blanks from the last line start up to the tag go, if nothing else is there.
  std::string lstrip_line(std::string text) const {
    const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (line_start == 0 && !line_starting_) return text;
    if (line_start == text.size()) return text;
    for (size_t i = line_start; i < text.size();) {
      if (!py_isspace(utf8_decode(text, i))) return text;
    }
    text.resize(line_start);
    return text;
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) out_.tokens.push_back(Token{TokenKind::kText, std::move(text), offset});
  }

  // After a tag end: `-` strips all following whitespace; trim_blocks drops one newline.
  void after_tag_end(bool strip_all, bool trim_newline) {
    const std::string& s = out_.source;
    const size_t start = pos_;
    if (strip_all) {
      while (pos_ < s.size()) {
        size_t next = pos_;
        if (!py_isspace(utf8_decode(s, next))) break;
        pos_ = next;
      }
    } else if (trim_newline && pos_ < s.size() && s[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > start && s[pos_ - 1] == '\n';
  }

  void lex_comment(size_t tag_offset) {
    const std::string& s = out_.source;
    const size_t end = s.find("#}", pos_);
    if (end == std::string::npos) fail("unclosed comment", tag_offset);
    const char before = end > pos_ ? s[end - 1] : '\0';
    pos_ = end + 2;
    after_tag_end(before == '-', before != '+' && options_.trim_blocks);
  }

  bool starts_with(const char* lit) const { return out_.source.compare(pos_, std::strlen(lit), lit) == 0; }

  void skip_spaces() {
    while (pos_ < out_.source.size() && is_tag_space(out_.source[pos_])) ++pos_;
  }

  void lex_tag(TagKind kind, size_t tag_offset) {
    const bool block = kind == TagKind::kBlock;
    out_.tokens.push_back(Token{block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", tag_offset});
    const size_t first_token = out_.tokens.size();
    const char* end = block ? "%}" : "}}";
    while (true) {
      skip_spaces();
      if (pos_ >= out_.source.size()) fail(block ? "unclosed block tag '{%'" : "unclosed variable tag '{{'", tag_offset);
      const size_t end_offset = pos_;
      bool strip = false, plus = false, done = false;
      if (out_.source[pos_] == '-' && out_.source.compare(pos_ + 1, 2, end) == 0) {
        strip = done = true;
        pos_ += 3;
      } else if (block && starts_with("+%}")) {
        plus = done = true;
        pos_ += 3;
      } else if (starts_with(end)) {
        done = true;
        pos_ += 2;
      }
      if (done) {
        out_.tokens.push_back(Token{block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", end_offset});
        const bool is_raw = block && out_.tokens.size() == first_token + 2 &&
                            out_.tokens[first_token].kind == TokenKind::kName && out_.tokens[first_token].text == "raw";
        // Jinja2 applies trim_blocks after {% raw %}'s end only on the endraw side.
        after_tag_end(strip, block && !plus && !is_raw && options_.trim_blocks);
        if (is_raw) lex_raw_body(tag_offset);
        return;
      }
      lex_token();
    }
  }

  // {% raw %}...{% endraw %}: the body is text, untouched except for the endraw tag's own whitespace
  // control. The raw tag pair itself produces no tokens.
  void lex_raw_body(size_t tag_offset) {
    out_.tokens.resize(out_.tokens.size() - 3);  // drop {% raw %}
    const std::string& s = out_.source;
    for (size_t i = s.find("{%", pos_); i != std::string::npos; i = s.find("{%", i + 1)) {
      size_t j = i + 2;
      const char modifier = j < s.size() ? s[j] : '\0';
      if (modifier == '-' || modifier == '+') ++j;
      while (j < s.size() && is_tag_space(s[j])) ++j;
      if (s.compare(j, 6, "endraw") != 0) continue;
      j += 6;
      while (j < s.size() && is_tag_space(s[j])) ++j;
      bool strip = false;
      if (j < s.size() && (s[j] == '-' || s[j] == '+')) strip = s[j++] == '-';
      if (s.compare(j, 2, "%}") != 0) continue;
      std::string body = s.substr(pos_, i - pos_);
      if (modifier == '-') body = py_strip(body, std::nullopt, false, true);
      else if (modifier != '+' && options_.lstrip_blocks) body = lstrip_line(std::move(body));
      emit_text(std::move(body), pos_);
      pos_ = j + 2;
      after_tag_end(strip, options_.trim_blocks);
      return;
    }
    fail("missing {% endraw %} for this {% raw %}", tag_offset);
  }

  void lex_token() {
    const std::string& s = out_.source;
    const size_t start = pos_;
    const char c = s[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      while (pos_ < s.size() && (std::isalnum(static_cast<unsigned char>(s[pos_])) || s[pos_] == '_')) ++pos_;
      out_.tokens.push_back(Token{TokenKind::kName, s.substr(start, pos_ - start), start});
      return;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return lex_number();
    if (c == '\'' || c == '"') return lex_string();
    static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                       ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
    for (const char* op : kOps) {
      if (starts_with(op)) {
        pos_ += std::strlen(op);
        out_.tokens.push_back(Token{TokenKind::kOperator, op, start});
        return;
      }
    }
    fail(std::string("unexpected character '") + c + "' in tag", start);
  }

  void lex_number() {
    const std::string& s = out_.source;
    const size_t start = pos_;
    std::string digits;
    auto take_digits = [&] {
      while (pos_ < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos_])) || s[pos_] == '_')) {
        if (s[pos_] != '_') digits += s[pos_];
        ++pos_;
      }
    };
    take_digits();
    bool is_float = false;
    if (pos_ + 1 < s.size() && s[pos_] == '.' && std::isdigit(static_cast<unsigned char>(s[pos_ + 1]))) {
      is_float = true;
      digits += s[pos_++];
      take_digits();
    }
    if (pos_ < s.size() && (s[pos_] == 'e' || s[pos_] == 'E')) {
      size_t j = pos_ + 1;
      if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
      if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
        is_float = true;
        digits += 'e';
        digits.append(s, pos_ + 1, j - pos_ - 1);
        pos_ = j;
        take_digits();
      }
    }
    Token t{is_float ? TokenKind::kFloat : TokenKind::kInt, s.substr(start, pos_ - start), start};
    try {
      if (is_float) t.float_value = std::stod(digits);
      else t.int_value = std::stoll(digits);
    } catch (const std::exception&) {
      fail("number literal out of range", start);
    }
    out_.tokens.push_back(std::move(t));
  }

  // Python string literal escapes; unknown escapes keep their backslash, as Python does.
  void lex_string() {
    const std::string& s = out_.source;
    const size_t start = pos_;
    const char quote = s[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= s.size()) fail("unterminated string literal", start);
      const char c = s[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= s.size()) fail("unterminated string literal", start);
      const char e = s[pos_++];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (pos_ + n > s.size()) fail("truncated \\" + std::string(1, e) + " escape", pos_ - 2);
          const std::string hex = s.substr(pos_, n);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail("truncated \\" + std::string(1, e) + " escape", pos_ - 2);
          utf8_append(value, static_cast<char32_t>(std::stoul(hex, nullptr, 16)));
          pos_ += n;
          break;
        }
        default: value += '\\'; value += e;
      }
    }
    out_.tokens.push_back(Token{TokenKind::kString, std::move(value), start});
  }

  LexOptions options_;
  LexedTemplate out_;
  size_t pos_ = 0;
  bool line_starting_ = true;  // the previous token ended a line (or this is the template start)
};

// Jinja2 normalises \r\n and \r to \n and, unless keep_trailing_newline, drops one final newline.
std::string normalise_newlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

LexedTemplate lex(std::string_view source, const LexOptions& options) {
  return Lexer(normalise_newlines(source, options.keep_trailing_newline), options).run();
}

}  // namespace lathe::jinja
