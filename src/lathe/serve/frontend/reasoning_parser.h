// Reasoning-content parsers of the OpenAI-compatible server (serving spec §9: `reasoning_content`):
// split a thinking model's output, fed in pieces, into reasoning and content. Runs before the
// ToolCallParser, which is fed the `content` part (see tool_call_parser.h for the whole order of work
// and which markers are special tokens: decode with special tokens kept).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::serve {

enum class ReasoningFormat : uint8_t {
  kNone,    // no reasoning: all output is content
  kQwen3,   // <think>\n...\n</think>\n\n then the answer (Qwen3, QwQ, DeepSeek-R1 style)
  kGemma4,  // <|channel>thought\n...<channel|> then the answer (specs/gemma4.md §6)
  kCount
};

// From the chat template's text (<|channel> Gemma 4; <think> or </think> Qwen3 style), or from
// config.json's model_type (qwen3*, gemma4*) when the template is empty.
ReasoningFormat detect_reasoning_format(std::string_view model_type, std::string_view chat_template);

// --reasoning-parser names: "none", "qwen3", "gemma4"; the parse also takes "deepseek_r1" (qwen3).
std::string_view to_string(ReasoningFormat format);
std::optional<ReasoningFormat> reasoning_format_from_string(std::string_view name);

// Whether the rendered prompt ends by opening a reasoning block (whitespace aside), so that the output
// starts inside it: some templates end the generation prompt with "<think>\n" (Qwen3 thinking-only
// releases). A closed block (Qwen3's "<think>\n\n</think>\n\n" with enable_thinking false, Gemma 4's
// empty "<|channel>thought\n<channel|>") does not, nor does a marker earlier in the prompt.
bool prompt_opens_reasoning(ReasoningFormat format, std::string_view prompt);

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

// A streaming splitter for one choice's output. A reasoning block is recognised only at the start of
// the output (whitespace aside), or the output starts inside one (starts_in_reasoning); a block never
// closed runs to the end of the output. The markers and the whitespace next to them are dropped (the
// template's own separators: "<think>\n", "\n</think>\n\n"). Any split of the text gives the same
// concatenated result; an incomplete UTF-8 sequence at the end of a feed is held back.
class ReasoningParser {
 public:
  explicit ReasoningParser(ReasoningFormat format, bool starts_in_reasoning = false);

  ReasoningDelta feed(std::string_view text);  // new text since the last call
  ReasoningDelta finish();                     // end of output: flush held-back text
  // True while the output is inside a reasoning block (or may still open one): structured-output
  // grammars apply only after reasoning ends (spec §13 item 4).
  bool in_reasoning() const { return state_ == State::kReasoning || state_ == State::kReasoningStart; }
  ReasoningFormat format() const { return format_; }

 private:
  enum class State : uint8_t {
    kStart,           // nothing released yet: a block may open
    kReasoningStart,  // just inside a block: leading whitespace is dropped
    kReasoning,       // inside a block
    kAfterReasoning,  // the block closed: whitespace before the answer is dropped
    kContent,         // answer text to the end
  };
  // One decision about the front of `text`; false when more text is needed.
  bool step(std::string_view text, bool at_end, ReasoningDelta& out, size_t& consumed);
  ReasoningDelta run(bool at_end);

  ReasoningFormat format_;
  std::string_view start_, end_;  // the block's markers
  State state_ = State::kStart;
  std::string pending_;           // text fed but not yet decided about
  bool finished_ = false;
};

}  // namespace lathe::serve
