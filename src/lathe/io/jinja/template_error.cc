// ChatTemplateError and source positions (see template_error.h).
#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {

namespace {

std::string with_position(const std::string& message, int line, int column) {
  if (line <= 0) return "chat template: " + message;
  return "chat template: " + message + " (line " + std::to_string(line) + ", column " +
         std::to_string(column) + ")";
}

}  // namespace

ChatTemplateError::ChatTemplateError(Kind kind, const std::string& message, int line, int column)
    : lathe::Error(with_position(message, line, column)),
      kind_(kind),
      line_(line),
      column_(column),
      reason_(message) {}

SourcePosition locate(std::string_view source, size_t offset) {
  SourcePosition pos{1, 1};
  if (offset > source.size()) offset = source.size();
  for (size_t i = 0; i < offset; ++i) {
    const auto c = static_cast<unsigned char>(source[i]);
    if (c == '\n') {
      ++pos.line;
      pos.column = 1;
    } else if ((c & 0xC0) != 0x80) {  // count code points, not UTF-8 continuation bytes
      ++pos.column;
    }
  }
  return pos;
}

}  // namespace lathe::jinja
