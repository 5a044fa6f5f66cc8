// Chat template API (see chat_template.h).
#include "lathe/io/jinja/chat_template.h"

#include "lathe/io/jinja/interpreter.h"
#include "lathe/io/jinja/parser.h"

namespace lathe::jinja {

ChatTemplate::ChatTemplate(std::string_view source)
    : tree_(std::make_unique<const Template>(parse_template(source, ParseOptions{}))) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object())
    throw ChatTemplateError(ChatTemplateError::Kind::kRuntime, "the render context must be a JSON object");
  Value ctx;
  try {
    ctx = Value::from_json(context);
  } catch (const EvalError& e) {
    throw ChatTemplateError(ChatTemplateError::Kind::kRuntime, e.what());
  }
  return render_template(*tree_, ctx, options);
}

std::string render_chat_template(std::string_view template_source, const nlohmann::ordered_json& context,
                                 const RenderOptions& options) {
  return ChatTemplate(template_source).render(context, options);
}

std::optional<std::string> select_chat_template(const nlohmann::ordered_json& tokenizer_config,
                                                std::string_view name) {
  if (!tokenizer_config.is_object()) return std::nullopt;
  const auto it = tokenizer_config.find("chat_template");
  if (it == tokenizer_config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // transformers' named templates: [{"name": "default", "template": "..."}, ...]
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == name && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
  }
  return std::nullopt;
}

nlohmann::ordered_json special_token_variables(const nlohmann::ordered_json& tokenizer_config) {
  nlohmann::ordered_json vars = nlohmann::ordered_json::object();
  if (!tokenizer_config.is_object()) return vars;
  auto text_of = [](const nlohmann::ordered_json& t) -> std::optional<std::string> {
    if (t.is_string()) return t.get<std::string>();
    if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
    return std::nullopt;
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto it = tokenizer_config.find(key);
    if (it == tokenizer_config.end()) continue;
    if (auto text = text_of(*it)) vars[key] = *text;
  }
  const auto extra = tokenizer_config.find("additional_special_tokens");
  if (extra != tokenizer_config.end() && extra->is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& t : *extra)
      if (auto text = text_of(t)) list.push_back(*text);
    vars["additional_special_tokens"] = std::move(list);
  }
  return vars;
}

std::string apply_chat_template(const nlohmann::ordered_json& tokenizer_config, const ChatRequest& request,
                                const RenderOptions& options) {
  const std::optional<std::string> source = select_chat_template(tokenizer_config);
  if (!source)
    throw ChatTemplateError(ChatTemplateError::Kind::kNoTemplate,
                            "the tokenizer has no chat template (tokenizer_config.json has no 'chat_template')");
  nlohmann::ordered_json context = special_token_variables(tokenizer_config);
  context["messages"] = request.messages;
  context["add_generation_prompt"] = request.add_generation_prompt;
  if (request.extra.is_object())
    for (const auto& [k, v] : request.extra.items()) context[k] = v;
  return render_chat_template(*source, context, options);
}

}  // namespace lathe::jinja
