#include "lathe/serve/frontend/engine_requests.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "lathe/base/error.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& message) {
  throw ApiException(invalid_request(message, param));
}

// Fields the parser accepts (they are part of the API) that nothing behind the frontend implements yet.
void refuse_unsupported(const SamplingFields& s, const RequestCommon& c) {
  if (s.prompt_logprobs && *s.prompt_logprobs != 0 && c.stream)
    refuse("prompt_logprobs", "'prompt_logprobs' are not available when 'stream' is true");  // vLLM
  if (c.priority != 0) refuse("priority", "'priority' is not supported: the scheduler serves requests first come, first served");
  if (!c.response_format.is_null() && c.response_format.value("type", "text") != "text")
    refuse("response_format", "'response_format' other than {\"type\": \"text\"} needs structured output, not built yet");
  if (!c.structured_outputs.is_null())
    refuse("structured_outputs", "'structured_outputs' is not supported yet: no grammar-constrained decoding");
}

// An InvalidArgument of the engine's checks ("[sampling] top_p must be ...", "[engine] prompt has ...")
// as a 400 naming the field: the first word after the "[where]" prefix.
ApiException engine_refusal(const InvalidArgument& e, const std::string& prompt_param) {
  std::string message = e.what();
  if (message.rfind('[', 0) == 0 && message.find("] ") != std::string::npos) message = message.substr(message.find("] ") + 2);
  std::string field = message.substr(0, message.find_first_of(" :"));
  if (field == "prompt") field = prompt_param;
  return ApiException(invalid_request(message, field));
}

void check_fits(int64_t n_prompt, int64_t max_tokens, int64_t max_model_len, const std::string& prompt_param) {
  if (n_prompt >= max_model_len)
    throw ApiException(context_length_exceeded(
        str_cat("This model's maximum context length is ", max_model_len, " tokens. However, your prompt has ", n_prompt,
                " tokens, which leaves no room for output. Please reduce the length of the prompt."),
        prompt_param));
  if (n_prompt + max_tokens > max_model_len)
    throw ApiException(context_length_exceeded(
        str_cat("This model's maximum context length is ", max_model_len, " tokens. However, you requested ",
                n_prompt + max_tokens, " tokens (", n_prompt, " in the prompt, ", max_tokens,
                " in the completion). Please reduce the length of the prompt or max_tokens."),
        prompt_param));
}

// The sampling parameters every engine request of one OpenAI request shares: the fields, and the
// bad words tokenised once. A stream shows no prompt logprobs (vLLM accepts 0 there and sends none), so
// the engine computes none.
SamplingParams request_sampling(const SamplingFields& s, int max_tokens, const RequestCommon& common,
                                const PrepareContext& c) {
  SamplingParams p = sampling_params(s, max_tokens);
  p.bad_words_token_ids = bad_words_token_ids(c.tok, s.bad_words);
  if (common.stream) p.prompt_logprobs.reset();
  return p;
}

// The engine request for one prompt, checked by the engine's own rules before anything is queued.
EngineRequest engine_request(std::vector<int32_t> prompt, const SamplingParams& sampling, const RequestCommon& common,
                             const PrepareContext& c, const std::string& prompt_param) {
  EngineRequest r{.prompt = std::move(prompt), .sampling = sampling,
                  .cache_keys = {.adapter_id = c.adapter_id, .cache_salt = common.cache_salt.value_or("")}};
  try {
    check_engine_request(r, c.model, c.max_model_len);
  } catch (const InvalidArgument& e) {
    throw engine_refusal(e, prompt_param);
  }
  return r;
}

std::vector<int32_t> encode(const tokenizer::Tokenizer& tok, const std::string& text, bool add_special_tokens,
                            const std::string& param) {
  const std::vector<uint32_t> ids = tok.encode_ids(text, add_special_tokens);
  if (ids.empty()) refuse(param, str_cat("'", param, "' encodes to no tokens"));
  return std::vector<int32_t>(ids.begin(), ids.end());
}

ChoiceTextOptions text_options(const SamplingFields& s, int top_logprobs) {
  return {.stop = s.stop, .include_stop_str_in_output = s.include_stop_str_in_output,
          .skip_special_tokens = s.skip_special_tokens, .logprobs = s.logprobs.has_value(), .top_logprobs = top_logprobs};
}

}  // namespace

std::vector<std::vector<int32_t>> bad_words_token_ids(const tokenizer::Tokenizer& tok,
                                                      const std::vector<std::string>& words) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < words.size(); ++i) {
    // Python's str.lstrip() (vLLM strips the word first), on ASCII whitespace.
    const size_t start = words[i].find_first_not_of(" \t\n\v\f\r");
    const std::string word = start == std::string::npos ? std::string() : words[i].substr(start);
    const std::vector<uint32_t> bare = tok.encode_ids(word, /*add_special_tokens=*/false);
    if (bare.empty())
      refuse("bad_words", str_cat("'bad_words' entry ", i, " (\"", words[i], "\") has no tokens"));
    // The word inside a sentence (after a space), where the tokenizer marks word starts ("Ġword",
    // "▁word"): kept when it is another token sequence of the same length, as vLLM does.
    const std::vector<uint32_t> spaced = tok.encode_ids(" " + word, /*add_special_tokens=*/false);
    out.emplace_back(bare.begin(), bare.end());
    if (!spaced.empty() && spaced.front() != bare.front() && spaced.size() == bare.size())
      out.emplace_back(spaced.begin(), spaced.end());
  }
  return out;
}

SamplingParams sampling_params(const SamplingFields& s, int max_tokens) {
  SamplingParams p{.n = s.n, .temperature = s.temperature, .top_k = s.top_k, .top_p = s.top_p, .min_p = s.min_p,
                   .presence_penalty = s.presence_penalty, .frequency_penalty = s.frequency_penalty,
                   .repetition_penalty = s.repetition_penalty, .max_tokens = max_tokens, .min_tokens = s.min_tokens,
                   .ignore_eos = s.ignore_eos, .stop_token_ids = s.stop_token_ids, .logprobs = s.logprobs,
                   .prompt_logprobs = s.prompt_logprobs};
  p.logit_bias.assign(s.logit_bias.begin(), s.logit_bias.end());
  if (s.allowed_token_ids) p.allowed_token_ids = *s.allowed_token_ids;
  if (s.seed) p.seed = static_cast<uint64_t>(*s.seed);  // a negative seed wraps: any 64 bits seed the generator
  p.logprobs_mode = s.logprobs_mode == serve::LogprobsMode::kProcessed ? lathe::LogprobsMode::kProcessed
                                                                       : lathe::LogprobsMode::kRaw;
  return p;
}

PreparedGeneration prepare_completion(const CompletionRequest& r, const PrepareContext& c) {
  const SamplingFields& s = r.sampling;
  refuse_unsupported(s, r.common);
  if (r.echo && s.logprobs)
    refuse("echo", "'echo' with 'logprobs' needs the prompt's logprobs, which the model runner does not compute yet");
  const int max_tokens = s.max_tokens.value_or(16);  // the parser sets OpenAI's default, 16
  const SamplingParams sampling = request_sampling(s, max_tokens, r.common, c);
  // Completions report every alternative the engine sends: the top `logprobs`, and the sampled token
  // after them when it is not among them (OpenAI's "up to logprobs + 1").
  PreparedGeneration g{.n = s.n, .text = text_options(s, /*top_logprobs=*/-1)};
  g.text.delta_per_token = true;  // one chunk per token (vLLM's completions stream)
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const std::string param = r.prompts.size() > 1 ? str_cat("prompt[", i, "]") : std::string("prompt");
    std::vector<int32_t> ids;
    std::string echo;
    if (const auto* text = std::get_if<std::string>(&r.prompts[i])) {
      ids = encode(c.tok, *text, /*add_special_tokens=*/true, param);
      if (r.echo) echo = *text;
    } else {
      ids = std::get<std::vector<int32_t>>(r.prompts[i]);
      if (ids.empty()) refuse(param, str_cat("'", param, "' must not be empty"));
      if (r.echo) echo = c.tok.decode(std::vector<uint32_t>(ids.begin(), ids.end()), /*skip_special_tokens=*/false);
    }
    check_fits(static_cast<int64_t>(ids.size()), max_tokens, c.max_model_len, param);
    g.prompt_tokens += static_cast<int64_t>(ids.size());
    g.requests.push_back(engine_request(std::move(ids), sampling, r.common, c, param));
    g.echo.push_back(std::move(echo));
  }
  return g;
}

PreparedGeneration prepare_chat(const ChatCompletionRequest& r, const PrepareContext& c) {
  const SamplingFields& s = r.sampling;
  refuse_unsupported(s, r.common);
  if (r.tool_choice.is_object() || r.tool_choice == "required")
    refuse("tool_choice", "'tool_choice' \"required\" or a named function needs grammar-constrained decoding, not built "
                          "yet (\"auto\" and \"none\" work)");
  if (!c.chat) refuse("messages", "this model has no chat template (tokenizer_config.json has no 'chat_template'); use /v1/completions");
  // The template writes the special tokens itself (as transformers' apply_chat_template, which
  // tokenises the rendered text without adding them again).
  const std::string prompt = c.chat->render(r);
  std::vector<int32_t> ids = encode(c.tok, prompt, /*add_special_tokens=*/false, "messages");
  const int64_t n_prompt = static_cast<int64_t>(ids.size());
  // Chat's default output cap is the rest of the context (spec §6).
  const int64_t max_tokens = s.max_tokens ? *s.max_tokens : std::max<int64_t>(1, c.max_model_len - n_prompt);
  check_fits(n_prompt, max_tokens, c.max_model_len, "messages");
  PreparedGeneration g{.n = s.n, .prompt_tokens = n_prompt, .text = text_options(s, s.logprobs.value_or(0))};
  const bool tools_on = r.tools.is_array() && !r.tools.empty() && r.tool_choice != "none";
  if (tools_on) g.text.tool_calls = c.tool_call_format;
  g.text.single_tool_call = !r.parallel_tool_calls;
  g.text.reasoning = c.reasoning_format;
  // A template may open the reasoning block itself (the output then starts inside it).
  g.text.starts_in_reasoning = prompt_opens_reasoning(c.reasoning_format, prompt);
  const SamplingParams sampling = request_sampling(s, static_cast<int>(max_tokens), r.common, c);
  g.requests.push_back(engine_request(std::move(ids), sampling, r.common, c, "messages"));
  g.echo.emplace_back();
  return g;
}

}  // namespace lathe::serve
