// Backend events -> OpenAI response bodies (serving spec §9): the non-streaming completion and
// chat.completion objects, the streamed chunks (text_completion / chat.completion.chunk with delta), the
// usage chunk of stream_options.include_usage, `data: [DONE]`, mid-stream errors, and GET /v1/models.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/serve/http/output.h"

namespace lathe::serve {

enum class Endpoint : uint8_t { kCompletions, kChatCompletions, kCount };

struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;                      // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;                 // unix seconds
  std::string model;                   // the served name the request asked for
  int n_choices = 1;                   // n * prompts
  bool logprobs = false;               // the request asked for logprobs
  bool prompt_logprobs = false;        // ... and for prompt_logprobs (non-streaming responses only, as vLLM)
};

nlohmann::ordered_json usage_json(const Usage& u);
// `data: <json>\n\n`, one Server-Sent Event.
std::string sse_event(const nlohmann::ordered_json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Collects a request's events into its one response body (stream: false).
class ResponseBuilder {
 public:
  explicit ResponseBuilder(ResponseMeta meta);
  void add(const GenerationOutput& out);
  nlohmann::ordered_json build() const;        // after the finished event

 private:
  struct Choice {
    std::string text, reasoning;
    std::vector<ToolCallDelta> tool_calls;  // merged: one entry per call index
    std::vector<TokenLogprob> logprobs;
    std::vector<PromptPositionLogprobs> prompt_logprobs;
    std::string finish_reason = "stop";
  };
  ResponseMeta meta_;
  std::vector<Choice> choices_;
  Usage usage_;
};

// Turns each event of a streamed request into its SSE text: the chunks, and after the finished event
// the usage chunk (when asked for) and [DONE]; an error event becomes one error event and [DONE].
class StreamEncoder {
 public:
  struct Options {
    bool include_usage = false;          // "usage": null on every chunk, totals in a last chunk
    bool continuous_usage_stats = false; // vLLM extension: running totals on every chunk
  };
  StreamEncoder(ResponseMeta meta, Options options);
  std::string encode(const GenerationOutput& out);

 private:
  nlohmann::ordered_json chunk(nlohmann::ordered_json choices, const Usage& usage) const;
  nlohmann::ordered_json chat_choice(const ChoiceDelta& d, size_t text_offset);
  nlohmann::ordered_json completion_choice(const ChoiceDelta& d, size_t text_offset) const;

  ResponseMeta meta_;
  Options options_;
  std::vector<bool> role_sent_;        // chat: the role chunk went out for this choice
  std::vector<size_t> text_offset_;    // completions logprobs: offset of the next token in the choice text
};

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created", "owned_by", "root",
// "parent", "max_model_len"}]}: the base's served names (root: the first, parent null), then each adapter
// (vLLM: root its folder, parent the first served name).
nlohmann::ordered_json models_response(const std::vector<std::string>& names, int64_t created, int max_model_len,
                                       const std::vector<ServedAdapter>& adapters = {});

}  // namespace lathe::serve
