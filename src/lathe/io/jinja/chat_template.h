// Public API for chat templates: render a tokenizer's Jinja chat template the way transformers'
// apply_chat_template(tokenize=False) does (Jinja2 with trim_blocks, lstrip_blocks, loopcontrols,
// raise_exception, strftime_now and a tojson that keeps key order and non-ASCII text).
//
//   ChatTemplate tmpl(config["chat_template"]);            // parse once
//   std::string prompt = tmpl.render({{"messages", msgs}, {"add_generation_prompt", true},
//                                     {"bos_token", "<s>"}});
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lathe/io/jinja/render_options.h"
#include "lathe/io/jinja/template_error.h"

namespace lathe::jinja {

struct Template;

class ChatTemplate {
 public:
  // Throws ChatTemplateError (kSyntax) with line/column if the source does not parse.
  explicit ChatTemplate(std::string_view source);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // `context` is a JSON object whose keys become template variables. ordered_json keeps dict key
  // order, which `tojson` and `items` expose in the output. Thread-safe: rendering reads the tree only.
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  std::unique_ptr<const Template> tree_;
};

// Parse and render in one call.
std::string render_chat_template(std::string_view template_source, const nlohmann::ordered_json& context,
                                 const RenderOptions& options = {});

// The chat template of a tokenizer_config.json: `chat_template` as a string, or from a list of
// {"name", "template"} entries the one called `name`. nullopt when there is none.
std::optional<std::string> select_chat_template(const nlohmann::ordered_json& tokenizer_config,
                                                std::string_view name = "default");

// Template variables for the special tokens of tokenizer_config.json (bos_token, eos_token,
// unk_token, sep_token, pad_token, cls_token, mask_token, additional_special_tokens), as strings
// even where the config stores AddedToken objects ({"content": ...}).
nlohmann::ordered_json special_token_variables(const nlohmann::ordered_json& tokenizer_config);

struct ChatRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = false;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // tools, documents, enable_thinking, ...
};

// apply_chat_template(tokenize=False): special tokens, then messages / add_generation_prompt, then
// `extra` (later keys win). Throws ChatTemplateError kNoTemplate when the config has no template.
std::string apply_chat_template(const nlohmann::ordered_json& tokenizer_config, const ChatRequest& request,
                                const RenderOptions& options = {});

}  // namespace lathe::jinja
