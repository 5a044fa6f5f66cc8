// Test helper: table-driven render checks. Expected strings in the tables were produced by
// Python Jinja2 3.1 configured as transformers configures it (trim_blocks, lstrip_blocks,
// loopcontrols, its tojson / raise_exception / strftime_now), so each row pins Jinja2 behaviour.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lathe/io/jinja/chat_template.h"

namespace lathe::jinja::testing_util {

struct RenderCase {
  const char* name;
  const char* source;
  const char* context;  // JSON object
  const char* expected;
};

// The fixed clock the tables' strftime_now rows were generated with: 2024-03-05 14:07:09 local.
inline std::time_t fixed_now() {
  std::tm tm{};
  tm.tm_year = 2024 - 1900;
  tm.tm_mon = 2;
  tm.tm_mday = 5;
  tm.tm_hour = 14;
  tm.tm_min = 7;
  tm.tm_sec = 9;
  tm.tm_isdst = -1;
  return std::mktime(&tm);
}

template <size_t N>
void expect_renders(const RenderCase (&cases)[N]) {
  RenderOptions options;
  options.now = fixed_now();
  for (const RenderCase& c : cases) {
    SCOPED_TRACE(std::string(c.name) + ": " + c.source);
    try {
      EXPECT_EQ(render_chat_template(c.source, nlohmann::ordered_json::parse(c.context), options), c.expected);
    } catch (const ChatTemplateError& e) {
      ADD_FAILURE() << "threw: " << e.what();
    }
  }
}

// Renders and returns the error; fails the test if rendering succeeds.
inline ChatTemplateError render_error(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                                      const RenderOptions& options = {}) {
  try {
    const std::string out = render_chat_template(source, context, options);
    ADD_FAILURE() << "expected an error, rendered: " << out;
  } catch (const ChatTemplateError& e) {
    return e;
  }
  return ChatTemplateError(ChatTemplateError::Kind::kCount, "no error");
}

}  // namespace lathe::jinja::testing_util
