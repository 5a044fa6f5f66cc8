// ChatTemplateError: every failure of parsing or rendering a chat template, with the template
// line and column where it happened (1-based; 0 when no position applies, e.g. a missing template).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/base/error.h"

namespace lathe::jinja {

class ChatTemplateError : public lathe::Error {
 public:
  enum class Kind : uint8_t {
    kSyntax,      // the template does not parse, or uses unsupported syntax
    kRuntime,     // a type error, undefined access, unknown filter... while rendering
    kRaised,      // the template called raise_exception(msg): a bad conversation, user-facing
    kLimit,       // recursion, iteration or output size limit reached
    kNoTemplate,  // the tokenizer has no chat template
    kCount
  };

  ChatTemplateError(Kind kind, const std::string& message, int line = 0, int column = 0);

  Kind kind() const { return kind_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // The message without the " (line L, column C)" suffix, e.g. raise_exception's text.
  const std::string& reason() const { return reason_; }

 private:
  Kind kind_;
  int line_;
  int column_;
  std::string reason_;
};

// 1-based line and column (in code points) of byte `offset` in `source`.
struct SourcePosition {
  int line = 0;
  int column = 0;
};
SourcePosition locate(std::string_view source, size_t offset);

}  // namespace lathe::jinja
