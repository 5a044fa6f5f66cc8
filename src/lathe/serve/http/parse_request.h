// JSON body -> validated CompletionRequest / ChatCompletionRequest. Every failure throws ApiException
// with the OpenAI error the client gets: 400 invalid_request_error for malformed JSON (invalid UTF-8
// included), wrong types, out-of-range values and unsupported fields (best_of, suffix); 404
// model_not_found for a name the server does not serve; 400 context_length_exceeded for a max_tokens
// over the model's context.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/serve/http/request.h"

namespace lathe::serve {

struct RequestLimits {
  std::vector<std::string> served_models;  // the first is the default when "model" is absent
  int max_model_len = 0;                   // context length the backend reports (0: not checked here)
  int vocab_size = 0;                      // token ids must be below it (0: not checked here)
  int max_n = 16;                          // choices per request
  int max_logprobs = 20;                   // top alternatives per token (vLLM's max_logprobs)
  int max_prompts = 64;                    // entries of a completions "prompt" list
  bool reject_unknown_fields = false;      // false: ignore and log them (vLLM); true: 400 (OpenAI)
};

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits);
ChatCompletionRequest parse_chat_completion_request(std::string_view body, const RequestLimits& limits);

// The body as JSON; malformed JSON and invalid UTF-8 become a 400.
nlohmann::json parse_json_body(std::string_view body);

}  // namespace lathe::serve
