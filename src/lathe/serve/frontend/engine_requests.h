// OpenAI requests -> engine requests (serving spec §6, §9): prompts tokenised (completions: text with the
// special tokens the tokenizer's post-processor adds, or token ids as given; chat: the rendered chat
// template, tokenised without adding special tokens again), SamplingFields -> SamplingParams, max_tokens
// resolved and checked against the context before anything is queued, and each field lathe cannot honour
// yet refused by name (400) rather than ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/config.h"
#include "lathe/serve/engine/engine_request.h"
#include "lathe/serve/frontend/chat_prompt.h"
#include "lathe/serve/frontend/choice_pipeline.h"
#include "lathe/serve/http/request.h"

namespace lathe::serve {

// What turning a request into engine requests reads.
struct PrepareContext {
  const tokenizer::Tokenizer& tok;
  const ChatPromptRenderer* chat = nullptr;  // nullptr: the model has no chat template (chat requests get a 400)
  const ModelConfig& model;
  int64_t max_model_len = 0;                 // the engine's context length
  // The chat output parsers of this model (kNone: off); tool calls are parsed only for requests with
  // tools and a tool_choice other than "none".
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
  ReasoningFormat reasoning_format = ReasoningFormat::kNone;
  int64_t adapter_id = 0;                    // the served LoRA adapter the request's "model" names (0: the base)
};

// One OpenAI request as engine requests, and what the text pipelines of its choices need.
struct PreparedGeneration {
  std::vector<EngineRequest> requests;  // one per prompt, in order (chat: one)
  std::vector<std::string> echo;        // per prompt: the text its choices start with ("" without echo)
  int n = 1;                            // choices per prompt; the client's choice index is prompt * n + choice
  int64_t prompt_tokens = 0;            // over every prompt
  ChoiceTextOptions text;               // every choice's
};

// Both throw ApiException: 400 context_length_exceeded when a prompt and its max_tokens exceed
// max_model_len (or the prompt alone leaves no room), 400 invalid_request_error naming the field for an
// unsupported field (prompt_logprobs with stream, priority, structured output, a tool_choice that needs a grammar,
// echo with logprobs), a prompt or a bad word that encodes to no tokens, messages the chat template
// refuses, or anything the engine's own checks refuse (allowed_token_ids or bad-word tokens outside the
// model's vocabulary among them).
PreparedGeneration prepare_completion(const CompletionRequest& r, const PrepareContext& c);
PreparedGeneration prepare_chat(const ChatCompletionRequest& r, const PrepareContext& c);

// The engine's sampling parameters for these fields with this output cap, bad words left out (they need
// the tokenizer: bad_words_token_ids).
SamplingParams sampling_params(const SamplingFields& s, int max_tokens);

// The token sequences the sampler bans for `words`, as vLLM's SamplingParams.update_from_tokenizer
// builds them: each word, leading whitespace stripped, tokenised without special tokens; then " " + word
// too when that starts with another token and has as many tokens (the word after a space, for tokenizers
// that mark word starts). ApiException 400 naming bad_words for a word with no tokens.
std::vector<std::vector<int32_t>> bad_words_token_ids(const tokenizer::Tokenizer& tok,
                                                      const std::vector<std::string>& words);

}  // namespace lathe::serve
