#include "lathe/serve/frontend/choice_pipeline.h"

#include <algorithm>
#include <utility>

namespace lathe::serve {
namespace {

// A token's own text for logprobs: special tokens spelled out (as vLLM reports them), a byte that is
// part of a character as the tokenizer decodes it alone.
std::string token_text(const tokenizer::Tokenizer& tok, int32_t id) {
  const uint32_t ids[1] = {static_cast<uint32_t>(id)};
  return tok.decode(ids, /*skip_special_tokens=*/false);
}

// Whether an active output parser's markers are special tokens, which skip_special_tokens would drop
// before the parser sees them: Llama 3's <|python_tag|>, Mistral's [TOOL_CALLS], Gemma 4's <|tool_call>
// and <|channel> (tool_call_parser.h). Qwen3's <tool_call> and <think> are ordinary added tokens, so
// Qwen3 output keeps skipping the special ones.
bool parser_reads_special_tokens(const ChoiceTextOptions& o) {
  const bool special_tool_markers = o.tool_calls == ToolCallFormat::kLlama3Json ||
                                    o.tool_calls == ToolCallFormat::kMistral || o.tool_calls == ToolCallFormat::kGemma4;
  return special_tool_markers || o.reasoning == ReasoningFormat::kGemma4;
}

}  // namespace

ChoicePipeline::ChoicePipeline(const tokenizer::Tokenizer& tok, const ChoiceTextOptions& options, std::string echo)
    : tok_(tok),
      options_(options),
      decoder_(tok, options.skip_special_tokens && !parser_reads_special_tokens(options)),
      stops_(options.stop, options.include_stop_str_in_output),
      echo_(std::move(echo)) {
  if (options.reasoning != ReasoningFormat::kNone) reasoning_.emplace(options.reasoning, options.starts_in_reasoning);
  if (options.tool_calls != ToolCallFormat::kNone) tool_calls_.emplace(options.tool_calls, nullptr);  // random call ids
}

std::optional<ChoiceDelta> ChoicePipeline::on_engine_output(const EngineOutput& o) {
  if (finished_) return std::nullopt;
  ChoiceDelta d;
  std::string text;
  if (o.token) {
    ++n_tokens_;
    if (options_.logprobs && o.logprobs) d.logprobs.push_back(token_logprob(*o.token, *o.logprobs));
    // As vLLM's detokenizer: the EOS or stop id that ended the choice adds no text unless
    // include_stop_str_in_output (it is still a completion token).
    const bool ended_by_this_token = o.stop_token && *o.stop_token == *o.token;
    if (!ended_by_this_token || options_.include_stop_str_in_output) {
      StopStringMatcher::Output out = stops_.push(decoder_.push(static_cast<uint32_t>(*o.token)));
      text = std::move(out.text);
      if (out.stopped) {
        finished_ = stopped_by_string_ = true;
        d.finish_reason = "stop";
      }
    }
  }
  if (!finished_ && o.finish) {
    finished_ = true;
    // Text held back as a possible stop string's start is the output's end now; an aborted choice's
    // client is gone or the server is stopping, so nothing more is sent for it.
    if (*o.finish != FinishReason::kAbort) text += stops_.flush();
    d.finish_reason = std::string(finish_reason_name(*o.finish));  // sched_request.h: OpenAI's names
  }
  route_text(std::move(text), d);
  if (!echo_.empty()) {
    d.text = std::move(echo_) + d.text;
    echo_.clear();
  }
  const bool per_token = options_.delta_per_token && o.token;
  if (d.text.empty() && d.reasoning.empty() && d.tool_calls.empty() && d.logprobs.empty() && !d.finish_reason &&
      !per_token)
    return std::nullopt;
  return d;
}

void ChoicePipeline::route_text(std::string text, ChoiceDelta& delta) {
  if (!reasoning_) {
    route_content(std::move(text), delta);
    return;
  }
  ReasoningDelta r = reasoning_->feed(text);
  if (finished_) {
    ReasoningDelta rest = reasoning_->finish();
    r.reasoning += rest.reasoning;
    r.content += rest.content;
  }
  delta.reasoning += r.reasoning;
  route_content(std::move(r.content), delta);
}

void ChoicePipeline::route_content(std::string content, ChoiceDelta& delta) {
  if (!tool_calls_) {
    delta.text += content;
    return;
  }
  ParsedDelta p = tool_calls_->feed(content);
  if (finished_) {
    ParsedDelta rest = tool_calls_->finish();
    p.content += rest.content;
    for (ToolCallDelta& call : rest.tool_calls) p.tool_calls.push_back(std::move(call));
  }
  delta.text += p.content;
  for (ToolCallDelta& call : p.tool_calls) {
    if (options_.single_tool_call && call.index > 0) continue;  // parallel_tool_calls: false
    delta.tool_calls.push_back(std::move(call));
  }
  // A choice that called a tool and then ended by itself (EOS or a stop) finished to call it (OpenAI's
  // "tool_calls"); "length" stays: the output was cut.
  if (tool_calls_->n_calls() > 0 && delta.finish_reason == "stop") delta.finish_reason = "tool_calls";
}

TokenLogprob ChoicePipeline::token_logprob(int32_t token, const SampledLogprobs& lp) const {
  TokenLogprob t{.token = token_text(tok_, token), .logprob = lp.logprob};
  // The engine sends the top alternatives best first, with the sampled token after them when it is not
  // among them (so the list stays sorted); keep as many as the request asked for.
  const size_t k = options_.top_logprobs < 0 ? lp.top.size()
                                             : std::min(lp.top.size(), static_cast<size_t>(options_.top_logprobs));
  t.top.reserve(k);
  for (size_t i = 0; i < k; ++i) t.top.push_back({.token = token_text(tok_, lp.top[i].token), .logprob = lp.top[i].logprob});
  return t;
}

}  // namespace lathe::serve
