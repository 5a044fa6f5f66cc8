// Typed OpenAI requests after parsing and validation (serving spec §6, §9): what the HTTP layer hands
// to a ServingBackend. Field names follow the OpenAI API and vLLM's extensions; JSON that only the chat
// template or the grammar compiler reads (tools, tool_choice, response_format) is kept as JSON.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace lathe::serve {

enum class LogprobsMode : uint8_t { kRaw, kProcessed, kCount };  // spec §6: raw = before any processing

// The sampling surface of spec §6, defaults as listed there.
struct SamplingFields {
  int n = 1;
  std::optional<int> max_tokens;       // completions: 16 when absent; chat: the rest of the context
  int min_tokens = 0;
  float temperature = 1.0f;            // < 1e-5 means greedy
  float top_p = 1.0f;
  int top_k = 0;                       // 0 or -1: off
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::map<int32_t, float> logit_bias;  // token id -> bias in [-100, 100]
  std::optional<std::vector<int32_t>> allowed_token_ids;  // never empty when set (vLLM refuses [])
  std::vector<std::string> bad_words;   // words whose token sequences are banned (the frontend tokenises them)
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;
  bool ignore_eos = false;
  std::optional<int64_t> seed;
  std::optional<int> logprobs;         // top-k alternatives per sampled token (0 = the sampled one only; -1 = vocab)
  std::optional<int> prompt_logprobs;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
};

// Fields both endpoints share.
struct RequestCommon {
  std::string model;                   // the served name the request asked for (the default when absent)
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool continuous_usage_stats = false; // stream_options.continuous_usage_stats (vLLM extension)
  std::string user;
  int priority = 0;
  std::optional<std::string> cache_salt;
  nlohmann::json response_format;      // null when absent
  nlohmann::json structured_outputs;   // null when absent (vLLM's structured_outputs object)
  std::vector<std::string> ignored_fields;  // unknown top-level fields (logged, vLLM behaviour)
};

// POST /v1/completions: one prompt per entry; each is text or token ids.
using Prompt = std::variant<std::string, std::vector<int32_t>>;
struct CompletionRequest {
  RequestCommon common;
  SamplingFields sampling;
  std::vector<Prompt> prompts;         // "prompt": string | [string] | [int] | [[int]], never empty
  bool echo = false;
};

// One chat message: the role checked, the whole object kept for the chat template (content may be a
// string, a list of parts or null; assistant messages may carry tool_calls, tool messages tool_call_id).
struct ChatMessage {
  std::string role;                    // system | developer | user | assistant | tool
  nlohmann::json raw;
};

// POST /v1/chat/completions.
struct ChatCompletionRequest {
  RequestCommon common;
  SamplingFields sampling;
  std::vector<ChatMessage> messages;   // never empty
  nlohmann::json tools;                // null or a list of {"type": "function", "function": {...}}
  nlohmann::json tool_choice;          // null, "none" | "auto" | "required" | {"type": "function", ...}
  bool parallel_tool_calls = true;
  nlohmann::json chat_template_kwargs; // null or an object (e.g. {"enable_thinking": false})
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

}  // namespace lathe::serve
