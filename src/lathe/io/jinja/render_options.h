// Limits and inputs of one render that are not template variables. The limits bound what a
// hostile or buggy template can cost: it stops with ChatTemplateError (kLimit) instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>

namespace lathe::jinja {

struct RenderOptions {
  size_t max_output_bytes = size_t{32} << 20;  // also caps every intermediate string
  size_t max_items = size_t{1} << 20;          // longest list a template may build (range, +, *)
  int64_t max_loop_iterations = 1'000'000;     // total over all loops of one render
  int max_call_depth = 256;                    // nested macro calls (recursion)
  // Deepest recursion of the interpreter (statements, expressions, macro calls together): bounds its
  // stack use (~0.5 KB a level in release builds, a few KB under AddressSanitizer).
  int max_render_depth = 256;
  std::optional<std::time_t> now;              // strftime_now's clock; unset = current local time
};

}  // namespace lathe::jinja
