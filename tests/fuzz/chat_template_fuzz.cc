// libFuzzer target: the Jinja chat-template engine must parse and render any template source against a
// small fixed conversation either to a string or to a lathe::Error (ChatTemplateError: syntax, runtime,
// raise_exception, limit). Crashes, sanitizer reports, uncaught non-lathe exceptions and hangs are bugs;
// the render runs under tight RenderOptions limits so that a slow input is a bug, not a legitimate cost.
// Build: cmake --preset fuzz && cmake --build build/fuzz -j2
// Run:   build/fuzz/chat_template_fuzz -max_total_time=600 -timeout=10 -rss_limit_mb=2048 \
//          -dict=tests/fuzz/chat_template.dict CORPUS_DIR
//        (tests/fuzz/make_seeds.sh writes a seed corpus: the real chat templates plus snippets).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/io/jinja/chat_template.h"

namespace {

using nlohmann::ordered_json;

const ordered_json& context() {
  static const ordered_json* ctx = new ordered_json(ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2+2? <b>ünïcødé</b> 日本語 😀"},
      {"role": "assistant", "content": "<think>\nadd\n</think>\n\n4",
       "tool_calls": [{"type": "function", "id": "call_1",
                       "function": {"name": "add", "arguments": {"a": 2, "b": 2.5, "c": [true, null]}}}]},
      {"role": "user", "content": "and 3+3?"}
    ],
    "parts": [{"type": "text", "text": "and 3+3?"}, {"type": "image"}],
    "tool_message": {"role": "tool", "name": "add", "content": "4"},
    "tools": [{"type": "function", "function": {"name": "add", "description": "Adds.",
               "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                              "required": ["a", "b"]}}}],
    "documents": [{"title": "T", "text": "doc"}],
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
    "pad_token": null,
    "additional_special_tokens": ["<a>", "<b>"],
    "n": 3,
    "x": -1.5,
    "big": 9223372036854775807,
    "s": "a'b\"c\\n{{d}}"
  })"));
  return *ctx;
}

lathe::jinja::RenderOptions options() {
  lathe::jinja::RenderOptions o;
  o.max_output_bytes = size_t{1} << 20;
  o.max_items = size_t{1} << 14;
  o.max_loop_iterations = 100'000;
  o.max_call_depth = 64;
  o.max_render_depth = 1024;  // ASan frames are several times larger than release ones
  o.now = std::time_t{1'700'000'000};  // deterministic strftime_now
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // templates are a few KB; longer inputs only slow the search
  std::string source(reinterpret_cast<const char*>(data), size);  // exact-size heap block for ASan
  static const lathe::jinja::RenderOptions opts = options();
  try {
    lathe::jinja::ChatTemplate tmpl(source);
    std::string out = tmpl.render(context(), opts);
    static const bool verbose = std::getenv("LATHE_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "chat_template_fuzz: rendered %zu bytes\n", out.size());
    if (out.size() > opts.max_output_bytes) {
      std::fprintf(stderr, "chat_template_fuzz: output %zu bytes > max_output_bytes %zu\n", out.size(),
                   opts.max_output_bytes);
      std::abort();
    }
  } catch (const lathe::Error& e) {
    // ChatTemplateError or another lathe::Error: a rejected template, which is fine.
    static const bool verbose = std::getenv("LATHE_FUZZ_VERBOSE") != nullptr;  // triage: why seeds fail
    if (verbose) std::fprintf(stderr, "chat_template_fuzz: %s\n", e.what());
  }
  return 0;
}
