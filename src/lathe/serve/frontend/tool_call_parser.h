// Tool-call output parsers of the OpenAI-compatible server (serving spec §9, §13 item 7): turn a model's
// detokenised output, fed in pieces as it is generated, into content deltas and ToolCallDeltas, one
// parser per model family's call syntax. Streaming and non-streaming responses both use it (a
// non-streaming response is one feed of the whole text, then finish()).
//
// For the adapter (EngineBackend), the order of work per choice:
//   1. Detokenise with special tokens KEPT while a tool-call or reasoning parser is active: the markers
//      are added tokens, and some are `special: true`, which skip_special_tokens would erase.
//      Checked in the real tokenizer.json files under ~/.cache/lathe/tokenizers:
//        qwen3:  <tool_call> 151657, </tool_call> 151658, <think> 151667, </think> 151668 are added
//                tokens with special: false (kept by any decode, but decoded as whole tokens).
//        llama3: this folder is Llama 3.0 (128010 is <|reserved_special_token_5|>, no tool syntax in its
//                template); in Llama 3.1+ 128010 is <|python_tag|>, special: true like every
//                128000+ token.
//        llama2, gemma3: no tool or reasoning markers at all.
//      Not in the cache, so not checked here: Mistral's [TOOL_CALLS] / [ARGS] / [CALL_ID] are control
//      tokens (special) and Gemma 4's <|tool_call> <tool_call|> <|"|> <|channel> <channel|> are special
//      tokens (vLLM's gemma4 parser turns skip_special_tokens off for the same reason).
//   2. Cut stop strings.
//   3. ReasoningParser (reasoning_parser.h) when the model thinks; feed its `content` output here.
//   4. ToolCallParser: content -> ChoiceDelta::text, tool_calls -> ChoiceDelta::tool_calls; at the end
//      finish(), and finish_reason "tool_calls" when n_calls() > 0 (unless the choice hit "length").
// Only activate a parser when the request has tools and tool_choice is not "none"; otherwise text is
// content as generated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/serve/http/output.h"

namespace lathe::serve {

enum class ToolCallFormat : uint8_t {
  kNone,        // no parsing: all output is content
  kHermes,      // Qwen2.5 / Qwen3, Hermes: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, repeated
  kLlama3Json,  // Llama 3.1+: the whole message is [<|python_tag|>]{"name": ..., "parameters": {...}}[; {...}]
  kMistral,     // [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name[ARGS]{...}
  kGemma4,      // <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|> (specs/gemma4.md §6)
  kCount
};

// The format from the model folder: the chat template's text decides when it mentions a call syntax
// (<|tool_call> Gemma 4, <tool_call> Hermes, [TOOL_CALLS] Mistral, <|python_tag|> Llama 3.1+); a
// template without any is kNone (the model was not taught to call tools). Only an empty template falls
// back on config.json's model_type (qwen2*, qwen3* Hermes; mistral* Mistral; gemma4* Gemma 4).
ToolCallFormat detect_tool_call_format(std::string_view model_type, std::string_view chat_template);

// The --tool-call-parser names: "none", "hermes", "llama3_json", "mistral", "gemma4" (vLLM's names);
// the parse also takes "qwen", "qwen3" (hermes) and "llama3" (llama3_json). nullopt for anything else.
std::string_view to_string(ToolCallFormat format);
std::optional<ToolCallFormat> tool_call_format_from_string(std::string_view name);

// "call_" and 24 random letters and digits, the shape of OpenAI's ids.
std::string random_call_id();

// New output of one choice, split into content and tool-call fragments. Content keeps its order and so
// do calls; their relative order inside one delta is not represented (a chat message has neither).
struct ParsedDelta {
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
};

namespace detail {
class ToolCallScanner;
}

// A streaming parser for one choice's output.
//
// A call is emitted whole, in one ToolCallDelta (index, id, name and all its arguments), once its end
// is seen and it parses: until then it may still turn out malformed or unfinished, and both must end up
// as content. So the deltas of any split of the same text concatenate to the same result, and a
// streamed response says exactly what the non-streamed one says.
//
// Arguments: the model's arguments object, parsed (key order kept) and serialised by nlohmann::json's
// dump() without indentation: no whitespace between tokens, non-ASCII text kept as UTF-8, numbers
// re-printed (1.50 -> 1.5, 1e2 -> 100.0). Gemma 4's notation is converted to the same form.
//
// Text: content before, between and after calls streams as content as soon as it cannot be the start
// of a call marker; whitespace next to a call (the template's separators) is dropped; malformed text in
// a call marker is released as it was written. feed() accepts any split, including inside a marker or a
// UTF-8 sequence (an incomplete sequence at the end is held back). Never throws on model output.
class ToolCallParser {
 public:
  // make_call_id gives each call its id, non-empty ("call_..."); null means random_call_id.
  ToolCallParser(ToolCallFormat format, std::function<std::string()> make_call_id);
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  ToolCallParser& operator=(ToolCallParser&&) noexcept;

  ParsedDelta feed(std::string_view text);  // new text since the last call
  ParsedDelta finish();                     // end of output: flush held-back text; an unfinished call becomes content
  int n_calls() const { return n_calls_; }  // calls emitted so far (finish_reason "tool_calls" when > 0)
  ToolCallFormat format() const { return format_; }

 private:
  ParsedDelta run(bool at_end);

  ToolCallFormat format_;
  std::function<std::string()> make_call_id_;
  std::unique_ptr<detail::ToolCallScanner> scanner_;
  std::string pending_;                     // text fed but not yet decided about
  int n_calls_ = 0;
  bool finished_ = false;
};

}  // namespace lathe::serve
