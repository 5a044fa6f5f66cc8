#include "lathe/serve/http/response.h"

#include <algorithm>
#include <cmath>

namespace lathe::serve {

namespace {

// vLLM clamps -inf logprobs to -9999 so the JSON stays a number.
float finite_logprob(float lp) { return std::isfinite(lp) ? lp : -9999.0f; }

nlohmann::ordered_json utf8_bytes(const std::string& s) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
nlohmann::ordered_json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  nlohmann::ordered_json content = nlohmann::ordered_json::array();
  for (const TokenLogprob& t : lps) {
    nlohmann::ordered_json top = nlohmann::ordered_json::array();
    for (const TokenAlternative& a : t.top) {
      top.push_back({{"token", a.token}, {"logprob", finite_logprob(a.logprob)}, {"bytes", utf8_bytes(a.token)}});
    }
    content.push_back({{"token", t.token}, {"logprob", finite_logprob(t.logprob)}, {"bytes", utf8_bytes(t.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
nlohmann::ordered_json completion_logprobs(const std::vector<TokenLogprob>& lps, size_t text_offset) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::array(), values = nlohmann::ordered_json::array();
  nlohmann::ordered_json tops = nlohmann::ordered_json::array(), offsets = nlohmann::ordered_json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    values.push_back(finite_logprob(t.logprob));
    nlohmann::ordered_json top = nlohmann::ordered_json::object();
    for (const TokenAlternative& a : t.top) top[a.token] = finite_logprob(a.logprob);
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.token.size();
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(values)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

// vLLM's prompt_logprobs: [null, {"<id>": {"logprob", "rank", "decoded_token"}}, ...]: the first prompt
// token has no logprob.
nlohmann::ordered_json prompt_logprobs_json(const std::vector<PromptPositionLogprobs>& lps) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array({nullptr});
  for (const PromptPositionLogprobs& position : lps) {
    nlohmann::ordered_json entries = nlohmann::ordered_json::object();
    for (const PromptLogprobEntry& e : position)
      entries[std::to_string(e.token_id)] = {{"logprob", finite_logprob(e.logprob)}, {"rank", e.rank},
                                             {"decoded_token", e.token}};
    out.push_back(std::move(entries));
  }
  return out;
}

nlohmann::ordered_json tool_call_json(const ToolCallDelta& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

nlohmann::ordered_json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string sse_event(const nlohmann::ordered_json& j) {
  // Replace, not throw, on invalid UTF-8: a detokeniser may cut a character; the stream must go on.
  return "data: " + j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

ResponseBuilder::ResponseBuilder(ResponseMeta meta) : meta_(std::move(meta)), choices_(meta_.n_choices) {}

void ResponseBuilder::add(const GenerationOutput& out) {
  for (const ChoiceDelta& d : out.choices) {
    if (d.index < 0 || d.index >= static_cast<int>(choices_.size())) continue;
    Choice& c = choices_[d.index];
    c.text += d.text;
    c.reasoning += d.reasoning;
    for (const ToolCallDelta& t : d.tool_calls) {
      auto it = std::find_if(c.tool_calls.begin(), c.tool_calls.end(), [&](const ToolCallDelta& x) { return x.index == t.index; });
      if (it == c.tool_calls.end()) {
        c.tool_calls.push_back(t);
      } else {
        it->arguments += t.arguments;
      }
    }
    c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    if (d.prompt_logprobs) c.prompt_logprobs = *d.prompt_logprobs;
    if (d.finish_reason) c.finish_reason = *d.finish_reason;
  }
  if (out.finished) usage_ = out.usage;
}

nlohmann::ordered_json ResponseBuilder::build() const {
  nlohmann::ordered_json choices = nlohmann::ordered_json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    nlohmann::ordered_json choice = {{"index", i}, {"finish_reason", c.finish_reason}, {"logprobs", nullptr}};
    if (meta_.endpoint == Endpoint::kCompletions) {
      choice["text"] = c.text;
      if (meta_.logprobs) choice["logprobs"] = completion_logprobs(c.logprobs, 0);
      if (meta_.prompt_logprobs) choice["prompt_logprobs"] = prompt_logprobs_json(c.prompt_logprobs);
    } else {
      nlohmann::ordered_json calls = nlohmann::ordered_json::array();
      for (const ToolCallDelta& t : c.tool_calls) calls.push_back(tool_call_json(t));
      // A message that only calls tools has null content (OpenAI).
      nlohmann::ordered_json content = c.text.empty() && !c.tool_calls.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.text);
      choice["message"] = {{"role", "assistant"},
                           {"content", std::move(content)},
                           {"reasoning_content", c.reasoning.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.reasoning)},
                           {"tool_calls", std::move(calls)}};
      if (meta_.logprobs) choice["logprobs"] = chat_logprobs(c.logprobs);
    }
    choices.push_back(std::move(choice));
  }
  nlohmann::ordered_json body = {{"id", meta_.id},
                                 {"object", object_name(meta_.endpoint, false)},
                                 {"created", meta_.created},
                                 {"model", meta_.model},
                                 {"choices", std::move(choices)},
                                 {"usage", usage_json(usage_)}};
  // Chat has one prompt: its logprobs sit beside the choices (vLLM's ChatCompletionResponse).
  if (meta_.prompt_logprobs && meta_.endpoint != Endpoint::kCompletions)
    body["prompt_logprobs"] = prompt_logprobs_json(choices_.empty() ? std::vector<PromptPositionLogprobs>{}
                                                                    : choices_[0].prompt_logprobs);
  return body;
}

StreamEncoder::StreamEncoder(ResponseMeta meta, Options options)
    : meta_(std::move(meta)), options_(options), role_sent_(meta_.n_choices, false), text_offset_(meta_.n_choices, 0) {}

nlohmann::ordered_json StreamEncoder::chunk(nlohmann::ordered_json choices, const Usage& usage) const {
  nlohmann::ordered_json j = {{"id", meta_.id},
                      {"object", object_name(meta_.endpoint, true)},
                      {"created", meta_.created},
                      {"model", meta_.model},
                      {"choices", std::move(choices)}};
  if (options_.continuous_usage_stats) {
    j["usage"] = usage_json(usage);
  } else if (options_.include_usage) {
    j["usage"] = nullptr;  // only the last chunk carries totals
  }
  return j;
}

nlohmann::ordered_json StreamEncoder::chat_choice(const ChoiceDelta& d, size_t text_offset) {
  nlohmann::ordered_json delta = nlohmann::ordered_json::object();
  if (!d.text.empty()) delta["content"] = d.text;
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.tool_calls.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (const ToolCallDelta& t : d.tool_calls) {
      // The first fragment of a call names it; later fragments only add to its arguments.
      if (!t.id.empty()) {
        calls.push_back({{"index", t.index}, {"id", t.id}, {"type", "function"},
                         {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
      } else {
        calls.push_back({{"index", t.index}, {"function", {{"arguments", t.arguments}}}});
      }
    }
    delta["tool_calls"] = std::move(calls);
  }
  return {{"index", d.index},
          {"delta", std::move(delta)},
          {"logprobs", meta_.logprobs && !d.logprobs.empty() ? chat_logprobs(d.logprobs) : nlohmann::ordered_json(nullptr)},
          {"finish_reason", d.finish_reason ? nlohmann::ordered_json(*d.finish_reason) : nlohmann::ordered_json(nullptr)}};
}

nlohmann::ordered_json StreamEncoder::completion_choice(const ChoiceDelta& d, size_t text_offset) const {
  return {{"index", d.index},
          {"text", d.text},
          {"logprobs", meta_.logprobs && !d.logprobs.empty() ? completion_logprobs(d.logprobs, text_offset) : nlohmann::ordered_json(nullptr)},
          {"finish_reason", d.finish_reason ? nlohmann::ordered_json(*d.finish_reason) : nlohmann::ordered_json(nullptr)}};
}

std::string StreamEncoder::encode(const GenerationOutput& out) {
  if (out.error) return sse_event(out.error->to_json()) + kSseDone;
  std::string sse;
  for (const ChoiceDelta& d : out.choices) {
    if (d.index < 0 || d.index >= meta_.n_choices) continue;
    if (meta_.endpoint == Endpoint::kChatCompletions) {
      // The first chunk of each choice carries the role and empty content (spec §9).
      if (!role_sent_[d.index]) {
        role_sent_[d.index] = true;
        nlohmann::ordered_json first = {{"index", d.index}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                {"logprobs", nullptr}, {"finish_reason", nullptr}};
        sse += sse_event(chunk(nlohmann::ordered_json::array({std::move(first)}), out.usage));
      }
      bool empty = d.text.empty() && d.reasoning.empty() && d.tool_calls.empty() && d.logprobs.empty();
      if (empty && !d.finish_reason) continue;
      sse += sse_event(chunk(nlohmann::ordered_json::array({chat_choice(d, text_offset_[d.index])}), out.usage));
    } else {
      if (d.text.empty() && d.logprobs.empty() && !d.finish_reason) continue;
      sse += sse_event(chunk(nlohmann::ordered_json::array({completion_choice(d, text_offset_[d.index])}), out.usage));
    }
    for (const TokenLogprob& t : d.logprobs) text_offset_[d.index] += t.token.size();
  }
  if (out.finished) {
    if (options_.include_usage) {
      nlohmann::ordered_json last = chunk(nlohmann::ordered_json::array(), out.usage);
      last["usage"] = usage_json(out.usage);
      sse += sse_event(last);
    }
    sse += kSseDone;
  }
  return sse;
}

nlohmann::ordered_json models_response(const std::vector<std::string>& names, int64_t created, int max_model_len,
                                       const std::vector<ServedAdapter>& adapters) {
  nlohmann::ordered_json data = nlohmann::ordered_json::array();
  for (const std::string& name : names) {
    data.push_back({{"id", name}, {"object", "model"}, {"created", created}, {"owned_by", "lathe"},
                    {"root", names.front()}, {"parent", nullptr}, {"max_model_len", max_model_len}});
  }
  for (const ServedAdapter& a : adapters) {
    data.push_back({{"id", a.name}, {"object", "model"}, {"created", created}, {"owned_by", "lathe"},
                    {"root", a.path}, {"parent", names.front()}, {"max_model_len", max_model_len}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace lathe::serve
