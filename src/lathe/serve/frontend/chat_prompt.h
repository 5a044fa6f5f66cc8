// A chat request rendered with the model's own chat template, the way vLLM's OpenAI server renders it
// (transformers' apply_chat_template with tokenize=False): text-only message content, tools,
// chat_template_kwargs, add_generation_prompt and continue_final_message.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "lathe/io/jinja/chat_template.h"
#include "lathe/serve/http/request.h"

namespace lathe::serve {

class ChatPromptRenderer {
 public:
  // The template and special-token variables of a tokenizer_config.json. Throws
  // jinja::ChatTemplateError (kNoTemplate when it has none, kSyntax when the template does not parse).
  explicit ChatPromptRenderer(const nlohmann::ordered_json& tokenizer_config);

  // The prompt text (special tokens written by the template itself: tokenise it without adding them).
  // Thread-safe. ApiException 400 naming the field for content the model cannot take (a part that is
  // not text), a template that fails on these messages (raise_exception included), or a
  // continue_final_message whose final message the rendering does not contain.
  std::string render(const ChatCompletionRequest& r) const;

 private:
  jinja::ChatTemplate template_;
  nlohmann::ordered_json special_tokens_;  // bos_token, eos_token, ...: template variables
};

// transformers' continue_final_message: `rendered` cut right after the final message's text, so the
// model continues that message instead of starting a new one. nullopt when `rendered` does not hold it.
std::optional<std::string> cut_after_final_message(const std::string& rendered, const std::string& final_text);

}  // namespace lathe::serve
