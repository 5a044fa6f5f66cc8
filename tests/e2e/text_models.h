// Test helper: a small Qwen3 model that has memorised one tool call. A random-weight model never emits a
// tool call, so the end-to-end tests of tool calling need one that does: the Qwen3 fixture's architecture
// with the real Qwen3 tokenizer (LATHE_TOKENIZERS, default ~/.cache/lathe/tokenizers), trained here with
// lathe's own training code (next-token loss, backward, AdamW) on one conversation until greedy decoding
// answers it with the Hermes tool-call text, then saved as a Hugging Face folder with the tokenizer beside it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace lathe::testing {

// The chat request the model answers with a tool call: {"messages": [...], "tools": [...]}, as an OpenAI
// client sends it. Every object's keys are in sorted order, so the prompt renders the same whether a
// server keeps the client's key order or sorts it (nlohmann::json).
const nlohmann::ordered_json& tool_call_request();

// What the model answers (greedily) to tool_call_request(), before its <|im_end|>: Qwen3's Hermes-style
// call of get_weather with {"city": "Paris"}.
inline constexpr const char* kToolCallAnswer =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

struct ToolCallModel {
  std::string dir;         // the model folder; "" when the qwen3 tokenizer is not installed
  int steps = 0;           // optimizer steps the training took
  double seconds = 0;      // wall time of making it (training, the greedy check, saving)
  int prompt_tokens = 0;   // the rendered request's length
};

// Trains and saves the model once per test process (a scratch folder, deterministic: fixed seed, fixed
// thread count). Throws std::runtime_error when the training does not converge within its step bound or
// greedy decoding does not reproduce the answer token for token.
const ToolCallModel& tool_call_model();

}  // namespace lathe::testing
