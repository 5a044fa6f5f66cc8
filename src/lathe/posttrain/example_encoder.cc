#include "lathe/posttrain/example_encoder.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe::posttrain {

using nlohmann::ordered_json;

int64_t TokenizedExample::n_targets() const {
  int64_t n = 0;
  for (size_t i = 1; i < supervised.size(); ++i) n += supervised[i];
  return n;
}

namespace {

// Fixed clock for strftime_now: a template that prints today's date (Llama 3's system header) must render
// the same tokens when a run resumes on another day. 2024-07-26 00:00 UTC, Llama 3.1's own default date.
constexpr std::time_t kTemplateClock = 1721952000;

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Code points that start before each byte offset (the tokenizer's offsets count code points). The trained
// ranges are boundaries between renderings, so they fall between characters.
std::vector<uint32_t> code_point_index(const std::string& s) {
  std::vector<uint32_t> cp(s.size() + 1);
  uint32_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    cp[i] = n;
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  cp[s.size()] = n;
  return cp;
}

}  // namespace

ExampleEncoder::ExampleEncoder(tokenizer::TokenizerFiles files, EncoderOptions opts)
    : tok_(tokenizer::Tokenizer::from_files(files)), opts_(std::move(opts)) {
  if (!files.config_json.empty()) config_ = ordered_json::parse(files.config_json);  // from_files checked it
  if (!config_.is_object()) config_ = ordered_json::object();
  if (const std::optional<std::string> src = jinja::select_chat_template(config_))
    template_ = std::make_unique<jinja::ChatTemplate>(*src);
  specials_ = jinja::special_token_variables(config_);
  LATHE_CHECK_ARG(opts_.max_length >= 0, "max_length must be >= 0");
  LATHE_CHECK_ARG(opts_.template_kwargs.is_object(), "chat template kwargs must be a mapping");
}

ExampleEncoder::ExampleEncoder(ExampleEncoder&&) noexcept = default;
ExampleEncoder::~ExampleEncoder() = default;

ExampleEncoder open_example_encoder(const std::string& section, const std::string& tokenizer_path,
                                    const EncoderOptions& opts, const ModelConfig& mc) {
  LATHE_CHECK_ARG(mc.max_positions <= 0 || opts.max_length <= mc.max_positions, section, ".max_length ",
                  opts.max_length, " exceeds the model's context (max_position_embeddings = ", mc.max_positions, ")");
  ExampleEncoder enc(tokenizer::read_tokenizer_files(tokenizer_path), opts);
  LATHE_CHECK_ARG(static_cast<int64_t>(enc.tokenizer().vocab_size()) <= mc.vocab_size, tokenizer_path,
                  ": the tokenizer has ", enc.tokenizer().vocab_size(), " ids, more than the model's vocab_size ",
                  mc.vocab_size);
  return enc;
}

std::string ExampleEncoder::render(const ordered_json& messages, bool add_generation_prompt, const ordered_json& tools) const {
  if (!template_)
    throw jinja::ChatTemplateError(jinja::ChatTemplateError::Kind::kNoTemplate,
                                   "conversational data needs a chat template, and tokenizer_config.json has none");
  ordered_json context = specials_;
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  if (!tools.is_null()) context["tools"] = tools;
  for (const auto& [k, v] : opts_.template_kwargs.items()) context[k] = v;
  jinja::RenderOptions ro;
  ro.now = kTemplateClock;
  return template_->render(context, ro);
}

std::string ExampleEncoder::trailer(const ordered_json& tools) const {
  // What the template writes after the last message whatever it is (Llama 3's always-on assistant header):
  // the rendering of no messages, when that renders.
  try {
    return render(ordered_json::array(), false, tools);
  } catch (const std::exception&) {  // a template that needs a first message (Gemma's messages[0]) has none
    return "";
  }
}

std::vector<std::pair<size_t, size_t>> ExampleEncoder::assistant_spans(const ordered_json& messages, const ordered_json& tools,
                                                                       const std::string& where) const {
  const std::string full = render(messages, false, tools);
  const std::string trailer = this->trailer(tools);
  std::vector<std::pair<size_t, size_t>> spans;
  ordered_json prefix = ordered_json::array();
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k]["role"] == "assistant") {
      std::string head;  // what precedes the answer: earlier turns and the assistant header
      if (!prefix.empty()) head = render(prefix, true, tools);
      ordered_json upto = prefix;
      upto.push_back(messages[k]);
      std::string with = render(upto, false, tools);
      if (!trailer.empty() && with.size() >= head.size() + trailer.size() &&
          with.compare(with.size() - trailer.size(), trailer.size(), trailer) == 0)
        with.resize(with.size() - trailer.size());
      if (!starts_with(with, head) || !starts_with(full, with))
        throw FormatError(str_cat(where, ": the chat template is not prefix-preserving at message ", k,
                                  " (assistant): it renders messages[0..", k, "] differently once later messages follow"
                                  " (e.g. Qwen3 drops the thinking block of earlier turns), so the assistant's tokens"
                                  " cannot be found by prefix rendering; split the conversation after this turn or"
                                  " set sft.assistant_only_loss=false"));
      if (with.size() > head.size()) spans.push_back({head.size(), with.size()});
    }
    prefix.push_back(messages[k]);
  }
  return spans;
}

RenderedText ExampleEncoder::render_prompt_completion(const Turns& prompt, const Turns& completion, const ordered_json& tools,
                                                      const std::string& where, bool completion_only) const {
  RenderedText r;
  if (!prompt.conversational) {
    r.text = prompt.text + completion.text;
    r.spans.push_back({completion_only ? prompt.text.size() : 0, r.text.size()});
    r.append_eos = true;
    return r;
  }
  r.add_special_tokens = false;
  ordered_json all = prompt.messages;
  for (const auto& m : completion.messages) all.push_back(m);
  r.text = render(all, false, tools);
  size_t begin = 0;
  if (completion_only) {
    const std::string head = prompt.messages.empty() ? std::string() : render(prompt.messages, true, tools);
    if (!starts_with(r.text, head))
      throw FormatError(str_cat(where, ": the chat template renders the prompt (with the generation prompt) as no prefix"
                                       " of prompt + completion, so the completion cannot be found"));
    begin = head.size();
  }
  size_t end = r.text.size();  // the completion ends before a trailer (not part of any turn)
  if (const std::string t = trailer(tools); !t.empty() && end >= begin + t.size() &&
                                            r.text.compare(end - t.size(), t.size(), t) == 0)
    end -= t.size();
  if (opts_.assistant_only_loss) {
    for (auto [b, e] : assistant_spans(all, tools, where))
      if (std::max(b, begin) < std::min(e, end)) r.spans.push_back({std::max(b, begin), std::min(e, end)});
  } else {
    r.spans.push_back({begin, end});
  }
  return r;
}

RenderedText ExampleEncoder::render_sft(const Example& e, DatasetKind kind) const {
  if (kind == DatasetKind::kPromptCompletion)
    return render_prompt_completion(e.prompt, e.completion, e.tools, e.where, opts_.completion_only_loss);
  LATHE_CHECK_ARG(kind == DatasetKind::kLanguageModeling, e.where, ": SFT trains on language modelling or prompt-completion"
                  " data, not ", dataset_kind_name(kind));
  RenderedText r;
  if (!e.text.conversational) {
    r.text = e.text.text;
    r.spans.push_back({0, r.text.size()});
    r.append_eos = true;
    return r;
  }
  r.add_special_tokens = false;
  r.text = render(e.text.messages, false, e.tools);
  if (opts_.assistant_only_loss) r.spans = assistant_spans(e.text.messages, e.tools, e.where);
  else r.spans.push_back({0, r.text.size()});
  return r;
}

TokenizedExample ExampleEncoder::tokenize(const RenderedText& r, const std::string& where) const {
  const tokenizer::Encoding enc = tok_.encode(r.text, r.add_special_tokens);
  const std::vector<uint32_t> cp = code_point_index(r.text);
  std::vector<std::pair<uint32_t, uint32_t>> cp_spans;  // trained ranges in code points
  for (auto [b, e] : r.spans) cp_spans.push_back({cp[b], cp[e]});
  TokenizedExample ex;
  ex.ids.reserve(enc.ids.size() + 1);
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    ex.ids.push_back(static_cast<int32_t>(enc.ids[i]));
    const auto [s, t] = enc.offsets[i];
    bool on = false;
    for (auto [b, e] : cp_spans) on = on || (s < t && s < e && b < t);
    ex.supervised.push_back(on ? 1 : 0);
  }
  if (r.append_eos && tok_.special_tokens().eos_id) {
    const auto eos = static_cast<int32_t>(*tok_.special_tokens().eos_id);
    if (ex.ids.empty() || ex.ids.back() != eos) {
      ex.ids.push_back(eos);
      ex.supervised.push_back(1);
    } else {
      ex.supervised.back() = 1;  // the post-processor's EOS: trained, as TRL's appended one
    }
  }
  const int64_t before = ex.n_targets();
  if (before == 0)
    throw FormatError(str_cat(where, ": no trained tokens (", ex.ids.size(), " tokens, all masked: a prompt with an empty"
                              " completion, or a conversation without assistant messages under assistant-only loss)"));
  const auto max_len = static_cast<size_t>(opts_.max_length);
  if (max_len > 0 && ex.ids.size() > max_len) {
    const size_t cut = ex.ids.size() - max_len;
    if (opts_.truncation == Truncation::kKeepEnd) {
      ex.ids.erase(ex.ids.begin(), ex.ids.begin() + static_cast<std::ptrdiff_t>(cut));
      ex.supervised.erase(ex.supervised.begin(), ex.supervised.begin() + static_cast<std::ptrdiff_t>(cut));
    } else {
      ex.ids.resize(max_len);
      ex.supervised.resize(max_len);
    }
    if (ex.n_targets() == 0)
      throw FormatError(str_cat(where, ": no trained tokens left after truncation to max_length ", max_len, " (",
                                opts_.truncation == Truncation::kKeepEnd ? "keep_end" : "keep_start", "; the example has ",
                                max_len + cut, " tokens, ", before, " trained): raise sft.max_length or drop the row"));
  }
  return ex;
}

TokenizedExample ExampleEncoder::encode_sft(const Example& e, DatasetKind kind) const {
  return tokenize(render_sft(e, kind), e.where);
}

std::pair<TokenizedExample, TokenizedExample> ExampleEncoder::encode_preference(const Example& e) const {
  return {tokenize(render_prompt_completion(e.prompt, e.chosen, e.tools, e.where + " (chosen)", true), e.where + " (chosen)"),
          tokenize(render_prompt_completion(e.prompt, e.rejected, e.tools, e.where + " (rejected)", true),
                   e.where + " (rejected)")};
}

TokenizedExample ExampleEncoder::encode_unpaired(const Example& e) const {
  return tokenize(render_prompt_completion(e.prompt, e.completion, e.tools, e.where, true), e.where);
}

std::vector<int32_t> stop_token_ids(const tokenizer::Tokenizer& tok, std::span<const int> model_eos,
                                    const nlohmann::json& generation_config) {
  std::vector<int32_t> ids;
  const auto add = [&](int64_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(static_cast<int32_t>(id));
  };
  if (tok.special_tokens().eos_id) add(*tok.special_tokens().eos_id);
  for (int id : model_eos) add(id);
  if (generation_config.is_object() && generation_config.contains("eos_token_id")) {
    const nlohmann::json& g = generation_config["eos_token_id"];
    if (g.is_number_integer()) add(g.get<int64_t>());
    if (g.is_array())
      for (const auto& v : g)
        if (v.is_number_integer()) add(v.get<int64_t>());
  }
  return ids;
}

void check_stop_token_trained(const TokenizedExample& ex, std::span<const int32_t> stop_ids,
                              const tokenizer::Tokenizer& tok, const std::string& where) {
  for (size_t i = 1; i < ex.ids.size(); ++i)
    if (ex.supervised[i] && std::find(stop_ids.begin(), stop_ids.end(), ex.ids[i]) != stop_ids.end()) return;
  std::string stops, last;
  for (int32_t id : stop_ids) stops += str_cat(stops.empty() ? "" : ", ", id, " ", tok.id_to_token(static_cast<uint32_t>(id)).value_or("?"));
  std::vector<uint32_t> tail;
  for (size_t i = ex.ids.size(); i-- > 0 && tail.size() < 8;)
    if (ex.supervised[i]) tail.insert(tail.begin(), static_cast<uint32_t>(ex.ids[i]));
  throw InvalidArgument(str_cat(where, ": no end-of-answer token is trained (stop tokens: ", stops.empty() ? "none known" : stops,
                                "; the last trained tokens decode to '", tok.decode(tail), "'): the model would never learn"
                                " to stop. Check the chat template's end of turn, the tokenizer's eos_token and the model's"
                                " eos_token_id"));
}

}  // namespace lathe::posttrain
