// One choice's text pipeline: engine tokens in, the deltas a client receives out. Incremental
// detokenisation (whole UTF-8 characters only), then stop strings across token boundaries
// (infer/stop_strings.h), then the output parsers' slot (route_text: where the streaming tool-call and
// reasoning parsers go), with each token's logprobs and the choice's finish reason.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/infer/stop_strings.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/serve/engine/engine_request.h"
#include "lathe/serve/frontend/reasoning_parser.h"
#include "lathe/serve/frontend/tool_call_parser.h"
#include "lathe/serve/http/output.h"

namespace lathe::serve {

struct ChoiceTextOptions {
  std::vector<std::string> stop;            // stop strings, each non-empty
  bool include_stop_str_in_output = false;  // keep the matched stop string, and the text of the EOS / stop id
  bool skip_special_tokens = true;          // special tokens add no text
  bool logprobs = false;                    // report each token's logprob (the engine sends them)
  int top_logprobs = 0;                     // alternatives reported per token, best first; -1: all the engine sent
  // A delta for every token, its text empty when the token adds none yet (a special token, half a
  // character, a possible stop string's start): completions stream one chunk per token, as vLLM's do,
  // so a client sees each token's time. Off (chat): deltas only when there is something to say.
  bool delta_per_token = false;
  // Output parsers (chat only). Where a format's markers are special tokens (Llama 3, Mistral, Gemma 4),
  // special tokens are kept in the text while its parser is on (tool_call_parser.h).
  ToolCallFormat tool_calls = ToolCallFormat::kNone;  // the request has tools and tool_choice is not "none"
  bool single_tool_call = false;                      // parallel_tool_calls: false: calls after the first are dropped
  ReasoningFormat reasoning = ReasoningFormat::kNone;
  bool starts_in_reasoning = false;                   // the rendered prompt opened the reasoning block
};

class ChoicePipeline {
 public:
  // The tokenizer must outlive the pipeline. `echo` goes before the choice's first text (completions'
  // echo: the prompt).
  ChoicePipeline(const tokenizer::Tokenizer& tok, const ChoiceTextOptions& options, std::string echo = "");

  // One engine output of this choice -> the delta to send; nullopt when there is nothing to send yet
  // (text held back: half a character, or what may start a stop string). Outputs after the choice
  // finished are ignored (the engine goes on until it hears of a stop string's abort). `index` of the
  // delta is left 0 for the caller to set. Throws lathe::Error when the detokeniser fails.
  std::optional<ChoiceDelta> on_engine_output(const EngineOutput& o);

  bool finished() const { return finished_; }
  bool stopped_by_string() const { return stopped_by_string_; }  // finished by a stop string, not by the engine
  // Completion tokens: every token the engine sent up to and including the one that finished the choice.
  int64_t n_tokens() const { return n_tokens_; }

 private:
  // Text past the stop strings -> the delta's content, reasoning and tool calls: the reasoning parser
  // first, its content through the tool-call parser; both finish() once finished_. Without parsers the
  // text is content. Called once per engine output, after finished_ is settled.
  void route_text(std::string text, ChoiceDelta& delta);
  void route_content(std::string content, ChoiceDelta& delta);  // the tool-call parser's part
  TokenLogprob token_logprob(int32_t token, const SampledLogprobs& lp) const;

  const tokenizer::Tokenizer& tok_;
  ChoiceTextOptions options_;
  tokenizer::StreamDecoder decoder_;
  StopStringMatcher stops_;
  std::optional<ReasoningParser> reasoning_;  // set when options_.reasoning is not kNone
  std::optional<ToolCallParser> tool_calls_;  // set when options_.tool_calls is not kNone
  std::string echo_;       // sent with the first delta, then cleared
  int64_t n_tokens_ = 0;
  bool finished_ = false;
  bool stopped_by_string_ = false;
};

}  // namespace lathe::serve
