#include "lathe/serve/http/parse_request.h"

#include <algorithm>
#include <limits>

#include "lathe/base/error.h"
#include "lathe/serve/http/api_error.h"
#include "lathe/serve/http/json_fields.h"

namespace lathe::serve {

namespace {

constexpr int64_t kMaxI32 = std::numeric_limits<int32_t>::max();

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiException(invalid_request(message, param));
}

int64_t token_id_limit(const RequestLimits& limits) { return limits.vocab_size > 0 ? limits.vocab_size - 1 : kMaxI32; }

// "model": absent means the default (first) served name; an unknown name is a 404.
std::string parse_model(JsonFields& f, const RequestLimits& limits) {
  std::optional<std::string> model = f.opt_string("model");
  if (!model) return limits.served_models.empty() ? std::string() : limits.served_models.front();
  if (std::find(limits.served_models.begin(), limits.served_models.end(), *model) == limits.served_models.end()) {
    throw ApiException(model_not_found(*model));
  }
  return *model;
}

RequestCommon parse_common(JsonFields& f, const RequestLimits& limits) {
  RequestCommon c;
  c.model = parse_model(f, limits);
  c.stream = f.opt_bool("stream").value_or(false);
  if (const nlohmann::json* so = f.find("stream_options")) {
    // vLLM: stream options only make sense on a stream.
    if (!c.stream) bad("stream_options", "'stream_options' can only be set when 'stream' is true");
    JsonFields sf(*so);
    c.include_usage = sf.opt_bool("include_usage").value_or(false);
    c.continuous_usage_stats = sf.opt_bool("continuous_usage_stats").value_or(false);
    std::vector<std::string> unknown = sf.unread_keys();
    if (!unknown.empty()) bad("stream_options", str_cat("'stream_options' has an unknown field '", unknown[0], "'"));
  }
  c.user = f.opt_string("user").value_or("");
  c.priority = static_cast<int>(f.opt_int("priority", -kMaxI32, kMaxI32).value_or(0));
  c.cache_salt = f.opt_string("cache_salt");
  if (c.cache_salt && c.cache_salt->empty()) bad("cache_salt", "'cache_salt' must not be empty");
  if (const nlohmann::json* rf = f.find("response_format")) {
    const nlohmann::json* type = rf->is_object() ? &(*rf)["type"] : nullptr;
    static const char* kTypes[] = {"text", "json_object", "json_schema"};
    if (!type || !type->is_string() ||
        std::none_of(std::begin(kTypes), std::end(kTypes), [&](const char* t) { return *type == t; })) {
      bad("response_format", "'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
    }
    if (*type == "json_schema" && !(rf->contains("json_schema") && (*rf)["json_schema"].is_object())) {
      bad("response_format", "'response_format' of type json_schema needs a 'json_schema' object");
    }
    c.response_format = *rf;
  }
  if (const nlohmann::json* so = f.find("structured_outputs")) {
    if (!so->is_object()) bad("structured_outputs", "'structured_outputs' must be an object");
    c.structured_outputs = *so;
  }
  return c;
}

// The §6 fields; `max_tokens` is checked against the context here, the prompt's share by the backend.
SamplingFields parse_sampling(JsonFields& f, const RequestLimits& limits) {
  SamplingFields s;
  if (f.find("best_of")) bad("best_of", "'best_of' is not supported (deprecated in vLLM V1); use 'n'");
  s.n = static_cast<int>(f.opt_int("n", 1, kMaxI32).value_or(1));
  if (s.n > limits.max_n) bad("n", str_cat("'n' must be at most ", limits.max_n, " on this server, got ", s.n));
  // max_completion_tokens is the newer OpenAI name; it wins when both are given (vLLM).
  std::optional<int64_t> max_tokens = f.opt_int("max_tokens", 1, kMaxI32);
  if (std::optional<int64_t> mct = f.opt_int("max_completion_tokens", 1, kMaxI32)) max_tokens = mct;
  if (max_tokens) {
    if (limits.max_model_len > 0 && *max_tokens > limits.max_model_len) {
      throw ApiException(context_length_exceeded(
          str_cat("'max_tokens' is ", *max_tokens, " but the model's context length is ", limits.max_model_len, " tokens"),
          "max_tokens"));
    }
    s.max_tokens = static_cast<int>(*max_tokens);
  }
  s.min_tokens = static_cast<int>(f.opt_int("min_tokens", 0, kMaxI32).value_or(0));
  if (s.max_tokens && s.min_tokens > *s.max_tokens) {
    bad("min_tokens", str_cat("'min_tokens' (", s.min_tokens, ") must not exceed 'max_tokens' (", *s.max_tokens, ")"));
  }
  constexpr double kInf = std::numeric_limits<double>::max();
  s.temperature = static_cast<float>(f.opt_number("temperature", 0.0, kInf).value_or(1.0));
  s.top_p = static_cast<float>(f.opt_number("top_p", 0.0, 1.0).value_or(1.0));
  if (s.top_p <= 0.0f) bad("top_p", "'top_p' must be in (0, 1], got 0");
  s.top_k = static_cast<int>(f.opt_int("top_k", -1, kMaxI32).value_or(0));
  s.min_p = static_cast<float>(f.opt_number("min_p", 0.0, 1.0).value_or(0.0));
  s.presence_penalty = static_cast<float>(f.opt_number("presence_penalty", -2.0, 2.0).value_or(0.0));
  s.frequency_penalty = static_cast<float>(f.opt_number("frequency_penalty", -2.0, 2.0).value_or(0.0));
  s.repetition_penalty = static_cast<float>(f.opt_number("repetition_penalty", 0.0, kInf).value_or(1.0));
  if (s.repetition_penalty <= 0.0f) bad("repetition_penalty", "'repetition_penalty' must be > 0");
  const int64_t max_id = token_id_limit(limits);
  if (const nlohmann::json* lb = f.find("logit_bias")) {
    if (!lb->is_object()) bad("logit_bias", "'logit_bias' must be an object {token id: bias}");
    for (const auto& [key, value] : lb->items()) {
      // Keys are token ids written as strings (JSON object keys).
      size_t used = 0;
      long long id = -1;
      try { id = std::stoll(key, &used); } catch (const std::exception&) { used = 0; }
      if (used != key.size() || id < 0 || id > max_id) {
        bad("logit_bias", str_cat("'logit_bias' key '", key, "' is not a token id in [0, ", max_id, "]"));
      }
      if (!value.is_number() || !(value.get<double>() >= -100.0 && value.get<double>() <= 100.0)) {
        bad("logit_bias", str_cat("'logit_bias' value for token ", key, " must be a number in [-100, 100]"));
      }
      s.logit_bias[static_cast<int32_t>(id)] = value.get<float>();
    }
  }
  s.allowed_token_ids = f.opt_int_list("allowed_token_ids", 0, max_id);
  if (s.allowed_token_ids && s.allowed_token_ids->empty())
    bad("allowed_token_ids", "'allowed_token_ids' must not be empty (it would allow no token)");
  s.bad_words = f.opt_string_or_strings("bad_words").value_or(std::vector<std::string>{});
  s.stop = f.opt_string_or_strings("stop").value_or(std::vector<std::string>{});
  for (const std::string& stop : s.stop) {
    if (stop.empty()) bad("stop", "'stop' strings must not be empty");
  }
  s.stop_token_ids = f.opt_int_list("stop_token_ids", 0, max_id).value_or(std::vector<int32_t>{});
  s.include_stop_str_in_output = f.opt_bool("include_stop_str_in_output").value_or(false);
  s.ignore_eos = f.opt_bool("ignore_eos").value_or(false);
  s.seed = f.opt_int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (std::optional<int64_t> pl = f.opt_int("prompt_logprobs", -1, limits.max_logprobs)) s.prompt_logprobs = static_cast<int>(*pl);
  if (std::optional<std::string> mode = f.opt_string("logprobs_mode")) {
    if (*mode == "raw_logprobs") s.logprobs_mode = LogprobsMode::kRaw;
    else if (*mode == "processed_logprobs") s.logprobs_mode = LogprobsMode::kProcessed;
    else bad("logprobs_mode", str_cat("'logprobs_mode' must be \"raw_logprobs\" or \"processed_logprobs\", got \"", *mode, "\""));
  }
  s.skip_special_tokens = f.opt_bool("skip_special_tokens").value_or(true);
  s.spaces_between_special_tokens = f.opt_bool("spaces_between_special_tokens").value_or(true);
  return s;
}

// Unknown top-level fields: kept for the log (vLLM), or a 400 when the server is strict (OpenAI).
void finish_fields(JsonFields& f, const RequestLimits& limits, RequestCommon& common) {
  common.ignored_fields = f.unread_keys();
  if (limits.reject_unknown_fields && !common.ignored_fields.empty()) {
    const std::string& key = common.ignored_fields.front();
    bad(key, str_cat("Unrecognized request argument supplied: '", key, "'"));
  }
}

std::vector<Prompt> parse_prompts(const nlohmann::json* v, const RequestLimits& limits) {
  if (!v) bad("prompt", "'prompt' is required");
  const int64_t max_id = token_id_limit(limits);
  auto ids = [&](const nlohmann::json& list) {
    std::vector<int32_t> out;
    for (const nlohmann::json& x : list) out.push_back(static_cast<int32_t>(json_int(x, 0, max_id, "prompt")));
    if (out.empty()) bad("prompt", "'prompt' token lists must not be empty");
    return out;
  };
  const char* kShape = "'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids";
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array() || v->empty()) bad("prompt", kShape);
  if ((*v)[0].is_number()) return {ids(*v)};
  std::vector<Prompt> out;
  for (const nlohmann::json& p : *v) {
    if (p.is_string()) out.emplace_back(p.get<std::string>());
    else if (p.is_array()) out.emplace_back(ids(p));
    else bad("prompt", kShape);
  }
  if (static_cast<int>(out.size()) > limits.max_prompts) {
    bad("prompt", str_cat("'prompt' may hold at most ", limits.max_prompts, " prompts, got ", out.size()));
  }
  return out;
}

ChatMessage parse_message(const nlohmann::json& m, size_t i) {
  const std::string param = str_cat("messages[", i, "]");
  if (!m.is_object()) bad(param, str_cat("'", param, "' must be an object, got ", json_type_name(m)));
  auto role = m.find("role");
  static const char* kRoles[] = {"system", "developer", "user", "assistant", "tool"};
  if (role == m.end() || !role->is_string() ||
      std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* r) { return *role == r; })) {
    bad(param + ".role", str_cat("'", param, ".role' must be one of system, developer, user, assistant, tool"));
  }
  auto content = m.find("content");
  bool has_tool_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (content == m.end() || content->is_null()) {
    // Only an assistant message that calls tools may leave its content out.
    if (!(*role == "assistant" && has_tool_calls)) bad(param + ".content", str_cat("'", param, ".content' is required"));
  } else if (content->is_array()) {
    for (const nlohmann::json& part : *content) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        bad(param + ".content", str_cat("'", param, ".content' parts must be objects with a 'type'"));
      }
    }
  } else if (!content->is_string()) {
    bad(param + ".content", str_cat("'", param, ".content' must be a string, a list of parts or null"));
  }
  if (has_tool_calls && !m["tool_calls"].is_array()) bad(param + ".tool_calls", str_cat("'", param, ".tool_calls' must be a list"));
  return {.role = role->get<std::string>(), .raw = m};
}

// tools: [{"type": "function", "function": {"name": str, ...}}]; the names, for tool_choice's check.
std::vector<std::string> check_tools(const nlohmann::json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::json& t = tools[i];
    const std::string param = str_cat("tools[", i, "]");
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object()) {
      bad(param, str_cat("'", param, "' must be {\"type\": \"function\", \"function\": {...}}"));
    }
    const nlohmann::json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
      bad(param + ".function.name", str_cat("'", param, ".function.name' must be a non-empty string"));
    }
    if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object()) {
      bad(param + ".function.parameters", str_cat("'", param, ".function.parameters' must be a JSON Schema object"));
    }
    names.push_back(fn["name"].get<std::string>());
  }
  return names;
}

void check_tool_choice(const nlohmann::json& choice, const std::vector<std::string>& tool_names, bool has_tools) {
  if (choice.is_string()) {
    if (choice != "none" && choice != "auto" && choice != "required") {
      bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", ...}");
    }
    if (choice == "required" && !has_tools) bad("tool_choice", "'tool_choice' \"required\" needs 'tools'");
    return;
  }
  if (!choice.is_object() || choice.value("type", "") != "function" || !choice.contains("function") ||
      !choice["function"].is_object() || !choice["function"].contains("name") || !choice["function"]["name"].is_string()) {
    bad("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  const std::string name = choice["function"]["name"].get<std::string>();
  if (std::find(tool_names.begin(), tool_names.end(), name) == tool_names.end()) {
    bad("tool_choice", str_cat("'tool_choice' names the function '", name, "', which is not in 'tools'"));
  }
}

}  // namespace

nlohmann::json parse_json_body(std::string_view body) {
  try {
    return nlohmann::json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's lexer rejects ill-formed UTF-8 inside strings as a parse error too.
    std::string what = e.what();
    bool utf8 = what.find("UTF-8") != std::string::npos;
    throw ApiException(invalid_request(str_cat(utf8 ? "The request body is not valid UTF-8: " : "The request body is not valid JSON: ",
                                               what)));
  }
}

CompletionRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  nlohmann::json j = parse_json_body(body);
  JsonFields f(j);
  CompletionRequest r;
  r.common = parse_common(f, limits);
  r.sampling = parse_sampling(f, limits);
  if (!r.sampling.max_tokens) r.sampling.max_tokens = 16;  // the OpenAI default for completions
  // Completions: "logprobs" is the number of alternatives (OpenAI allows up to 5, vLLM max_logprobs).
  if (std::optional<int64_t> lp = f.opt_int("logprobs", -1, limits.max_logprobs)) r.sampling.logprobs = static_cast<int>(*lp);
  r.prompts = parse_prompts(f.find("prompt"), limits);
  r.echo = f.opt_bool("echo").value_or(false);
  if (f.find("suffix")) bad("suffix", "'suffix' is not supported");
  finish_fields(f, limits, r.common);
  return r;
}

ChatCompletionRequest parse_chat_completion_request(std::string_view body, const RequestLimits& limits) {
  nlohmann::json j = parse_json_body(body);
  JsonFields f(j);
  ChatCompletionRequest r;
  r.common = parse_common(f, limits);
  r.sampling = parse_sampling(f, limits);
  // Chat: "logprobs" is a boolean and "top_logprobs" the number of alternatives.
  bool logprobs = f.opt_bool("logprobs").value_or(false);
  std::optional<int64_t> top = f.opt_int("top_logprobs", 0, limits.max_logprobs);
  if (top && !logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (logprobs) r.sampling.logprobs = static_cast<int>(top.value_or(0));
  const nlohmann::json* messages = f.find("messages");
  if (!messages || !messages->is_array() || messages->empty()) bad("messages", "'messages' must be a non-empty list");
  for (size_t i = 0; i < messages->size(); ++i) r.messages.push_back(parse_message((*messages)[i], i));
  std::vector<std::string> tool_names;
  if (const nlohmann::json* tools = f.find("tools")) {
    tool_names = check_tools(*tools);
    r.tools = *tools;
  }
  if (const nlohmann::json* choice = f.find("tool_choice")) {
    check_tool_choice(*choice, tool_names, !r.tools.is_null() && !r.tools.empty());
    r.tool_choice = *choice;
  }
  r.parallel_tool_calls = f.opt_bool("parallel_tool_calls").value_or(true);
  if (const nlohmann::json* kw = f.find("chat_template_kwargs")) {
    if (!kw->is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.chat_template_kwargs = *kw;
  }
  r.add_generation_prompt = f.opt_bool("add_generation_prompt").value_or(true);
  r.continue_final_message = f.opt_bool("continue_final_message").value_or(false);
  if (r.add_generation_prompt && r.continue_final_message) {
    bad("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  }
  finish_fields(f, limits, r.common);
  return r;
}

}  // namespace lathe::serve
