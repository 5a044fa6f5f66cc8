// Examples -> token ids and the mask of trained targets (specs/posttrain.md §2):
//   text / standard prompt-completion: tokenizer(text, special tokens) + EOS, the prompt masked when
//     completion-only (the TRL default for prompt-completion data);
//   conversations: the chat template's rendering (tokenized without adding special tokens: the template
//     writes them), with assistant-only masks computed by incremental prefix rendering: for each assistant
//     message k, the bytes that render(messages[0..k]) adds to render(messages[0..k), add_generation_prompt)
//     are trained (its content and end of turn, not the role header), mapped to tokens by their offsets. No
//     template is edited; a template that renders an earlier turn differently once later turns follow (not
//     prefix-preserving) is an error naming the row and the message. A trailer the template writes after
//     any last message (the rendering of no messages, e.g. Llama 3's assistant header) is not part of a turn.
// A token is trained when its characters overlap a trained byte range. Then truncation to max_length
// (keep_start / keep_end); an example with no trained target left is an error, never a silent zero loss.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lathe/io/jinja/chat_template.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/config.h"
#include "lathe/posttrain/dataset.h"

namespace lathe::posttrain {

enum class Truncation : uint8_t { kKeepStart, kKeepEnd, kCount };

struct EncoderOptions {
  int64_t max_length = 1024;  // TRL SFTConfig.max_length @f2cd5771; 0: no truncation
  Truncation truncation = Truncation::kKeepStart;
  bool completion_only_loss = true;   // prompt-completion data: train on the completion only
  bool assistant_only_loss = false;   // conversations: train on assistant messages only (TRL default false)
  // Extra chat template variables (enable_thinking, date_string, ...), after the special tokens.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};

struct TokenizedExample {
  std::vector<int32_t> ids;         // [n]
  std::vector<uint8_t> supervised;  // [n]: 1 where ids[i] is a trained target (predicted from ids[<i])
  int64_t n_targets() const;        // trained positions i >= 1 (position 0 has no prefix to predict from)
  size_t size() const { return ids.size(); }
};

// A rendered example: its text and the byte ranges [begin, end) of it that are trained.
struct RenderedText {
  std::string text;
  std::vector<std::pair<size_t, size_t>> spans;
  bool add_special_tokens = true;  // standard text: the post-processor's BOS; chat: the template writes them
  bool append_eos = false;         // standard text: EOS appended (and trained) unless already last
};

class ExampleEncoder {
 public:
  // `files`: the tokenizer (tokenizer_config.json gives the chat template and special token strings).
  ExampleEncoder(tokenizer::TokenizerFiles files, EncoderOptions opts);
  ExampleEncoder(ExampleEncoder&&) noexcept;
  ~ExampleEncoder();

  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  const EncoderOptions& options() const { return opts_; }

  // The chat template's rendering of `messages` (tools: null or a list); ChatTemplateError when the
  // tokenizer has none or rendering fails.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& tools) const;
  // The byte ranges of render(messages) that assistant messages add (see above). FormatError naming
  // `where` when the template is not prefix-preserving.
  std::vector<std::pair<size_t, size_t>> assistant_spans(const nlohmann::ordered_json& messages,
                                                         const nlohmann::ordered_json& tools,
                                                         const std::string& where) const;

  // Text and trained ranges of an SFT example (language modelling or prompt-completion).
  RenderedText render_sft(const Example& e, DatasetKind kind) const;
  // Tokens and mask of a rendering, truncated; FormatError "<where>: no trained tokens ..." when none is left.
  TokenizedExample tokenize(const RenderedText& r, const std::string& where) const;
  // render_sft + tokenize.
  TokenizedExample encode_sft(const Example& e, DatasetKind kind) const;
  // Preference pairs: prompt + chosen and prompt + rejected, each trained on its response only.
  std::pair<TokenizedExample, TokenizedExample> encode_preference(const Example& e) const;
  // Unpaired preference (KTO): prompt + completion, trained on the completion; e.label says which kind.
  TokenizedExample encode_unpaired(const Example& e) const;

 private:
  RenderedText render_prompt_completion(const Turns& prompt, const Turns& completion, const nlohmann::ordered_json& tools,
                                        const std::string& where, bool completion_only) const;
  std::string trailer(const nlohmann::ordered_json& tools) const;
  tokenizer::Tokenizer tok_;
  nlohmann::ordered_json config_;  // tokenizer_config.json (object; empty without one)
  std::unique_ptr<jinja::ChatTemplate> template_;  // null: the tokenizer has no chat template
  nlohmann::ordered_json specials_;                 // the template's special-token variables
  EncoderOptions opts_;
};

// The encoder of a post-training section's data (`section`: "sft", "dpo") for a model of config `mc`:
// InvalidArgument when <section>.max_length exceeds the model's context or the tokenizer has ids the
// model's vocabulary lacks (both numbers named).
ExampleEncoder open_example_encoder(const std::string& section, const std::string& tokenizer_path,
                                    const EncoderOptions& opts, const ModelConfig& mc);

// The ids that end an answer: the tokenizer's EOS, the model's eos_token_id(s) (config.json and
// generation_config.json), without repeats.
std::vector<int32_t> stop_token_ids(const tokenizer::Tokenizer& tok, std::span<const int> model_eos,
                                    const nlohmann::json& generation_config);

// Start-up check (specs/posttrain.md §8.4): at least one of `stop_ids` is a trained target of `ex`, or
// InvalidArgument naming `where`, the stop tokens and the last trained tokens: a model trained without its
// end of turn never learns to stop.
void check_stop_token_trained(const TokenizedExample& ex, std::span<const int32_t> stop_ids,
                              const tokenizer::Tokenizer& tok, const std::string& where);

}  // namespace lathe::posttrain
