#include "lathe/serve/frontend/chat_prompt.h"

#include <optional>
#include <string_view>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/io/jinja/py_text.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

std::string template_source(const nlohmann::ordered_json& tokenizer_config) {
  std::optional<std::string> s = jinja::select_chat_template(tokenizer_config);
  if (!s)
    throw jinja::ChatTemplateError(jinja::ChatTemplateError::Kind::kNoTemplate,
                                   "the tokenizer has no chat template (tokenizer_config.json has no 'chat_template')");
  return std::move(*s);
}

// A message as the template sees it: content given as a list of parts becomes one string, the text
// parts joined by newlines (vLLM's "string" content format); any other part is refused.
nlohmann::ordered_json template_message(const ChatMessage& m, size_t i) {
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(m.raw.dump());
  auto content = out.find("content");
  if (content == out.end() || !content->is_array()) return out;
  std::string text;
  for (size_t p = 0; p < content->size(); ++p) {
    const nlohmann::ordered_json& part = (*content)[p];
    const std::string param = str_cat("messages[", i, "].content[", p, "]");
    const std::string type = part.value("type", "");
    if (type != "text")
      throw ApiException(invalid_request(str_cat("'", param, "' is a '", type, "' part; this model takes text only"), param));
    if (!part.contains("text") || !part["text"].is_string())
      throw ApiException(invalid_request(str_cat("'", param, ".text' must be a string"), param + ".text"));
    if (p > 0) text += '\n';
    text += part["text"].get<std::string>();
  }
  *content = text;
  return out;
}

}  // namespace

ChatPromptRenderer::ChatPromptRenderer(const nlohmann::ordered_json& tokenizer_config)
    : template_(template_source(tokenizer_config)), special_tokens_(jinja::special_token_variables(tokenizer_config)) {}

std::optional<std::string> cut_after_final_message(const std::string& rendered, const std::string& final_text) {
  // transformers' apply_chat_template, continue_final_message=True, line for line.
  // Python's str.strip() / lstrip(), as transformers calls them.
  const std::string stripped = jinja::py_strip(final_text, std::nullopt, /*left=*/true, /*right=*/true);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos) return std::nullopt;
  const size_t lstripped = jinja::py_strip(final_text, std::nullopt, /*left=*/true, /*right=*/false).size();
  if (std::string_view(rendered).substr(at, lstripped) == final_text) return rendered.substr(0, at + lstripped);
  return rendered.substr(0, at + stripped.size());  // the template trimmed the message's trailing space
}

std::string ChatPromptRenderer::render(const ChatCompletionRequest& r) const {
  // transformers: the special tokens, then the caller's kwargs (chat_template_kwargs), then messages,
  // tools and add_generation_prompt, which kwargs cannot override.
  nlohmann::ordered_json context = special_tokens_;
  if (r.chat_template_kwargs.is_object())
    for (const auto& [k, v] : r.chat_template_kwargs.items()) context[k] = nlohmann::ordered_json::parse(v.dump());
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.messages.size(); ++i) messages.push_back(template_message(r.messages[i], i));
  context["messages"] = messages;
  // Key order inside each tool follows the parsed request (nlohmann::json sorts keys), not the client's.
  context["tools"] = nlohmann::ordered_json::parse(r.tools.dump());
  context["add_generation_prompt"] = r.add_generation_prompt;
  std::string rendered;
  try {
    rendered = template_.render(context);
  } catch (const jinja::ChatTemplateError& e) {
    const char* what = e.kind() == jinja::ChatTemplateError::Kind::kRaised ? "The chat template refused these messages: "
                                                                         : "The chat template failed on these messages: ";
    throw ApiException(invalid_request(str_cat(what, e.what()), "messages"));
  }
  if (!r.continue_final_message) return rendered;
  const std::string param = str_cat("messages[", r.messages.size() - 1, "].content");
  const nlohmann::ordered_json& last = messages.back()["content"];
  if (!last.is_string())
    throw ApiException(invalid_request("'continue_final_message' needs text in the final message to continue", param));
  std::optional<std::string> cut = cut_after_final_message(rendered, last.get<std::string>());
  if (!cut)
    throw ApiException(invalid_request("'continue_final_message' is set but the chat template does not write the final "
                                       "message's text into the prompt", param));
  return *cut;
}

}  // namespace lathe::serve
