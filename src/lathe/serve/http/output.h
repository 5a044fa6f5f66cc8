// What a ServingBackend produces for a request, as pieces the HTTP layer serialises: per-choice deltas
// (text, tool-call fragments, logprobs, the finish reason) and the request's usage at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/serve/http/api_error.h"

namespace lathe::serve {

// A LoRA adapter a backend serves beside its base model: a "model" a request may name.
struct ServedAdapter {
  std::string name;  // the request's "model"
  std::string path;  // the folder it was loaded from (/v1/models "root")
};

// One alternative of a token's top logprobs.
struct TokenAlternative {
  std::string token;                   // the token's text
  float logprob = 0.0f;
};

// The logprob of one generated token and its top alternatives (spec §6: up to logprobs + 1 entries).
struct TokenLogprob {
  std::string token;
  float logprob = 0.0f;
  std::vector<TokenAlternative> top;
};

// One entry of a prompt position's logprobs (vLLM's prompt_logprobs: {token id: {logprob, rank,
// decoded_token}}): the top alternatives, ranks 1..k, and the prompt token with its own rank.
struct PromptLogprobEntry {
  int32_t token_id = 0;
  std::string token;                   // decoded_token
  float logprob = 0.0f;
  int64_t rank = 0;
};
using PromptPositionLogprobs = std::vector<PromptLogprobEntry>;  // one prompt token: its entries

// A fragment of one tool call: the first fragment of a call carries id and name, later ones arguments.
struct ToolCallDelta {
  int index = 0;                       // the call's position in the choice's tool_calls
  std::string id;                      // "call_..." (first fragment only)
  std::string name;                    // function name (first fragment only)
  std::string arguments;               // a piece of the JSON arguments string
};

// New output of one choice since the previous event.
struct ChoiceDelta {
  int index = 0;                       // choice index in [0, n * prompts)
  std::string text;                    // detokenised text (stop strings already cut by the backend)
  std::string reasoning;               // reasoning_content text, if the model separates it
  std::vector<ToolCallDelta> tool_calls;
  std::vector<TokenLogprob> logprobs;  // one per new token when logprobs were asked for
  // Once per choice when prompt_logprobs was asked for: prompt tokens 1..T-1 (the first has none).
  std::optional<std::vector<PromptPositionLogprobs>> prompt_logprobs;
  std::optional<std::string> finish_reason;  // "stop" | "length" | "tool_calls" | "abort": the choice's last delta
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;           // prompt tokens served from the prefix cache
};

// One event of a request; events of a request never overlap in time. The last one has finished set;
// a mid-stream failure is a last event with error set.
struct GenerationOutput {
  std::vector<ChoiceDelta> choices;
  bool finished = false;
  Usage usage;                         // totals so far (read when finished)
  std::optional<ApiError> error;
};

}  // namespace lathe::serve
