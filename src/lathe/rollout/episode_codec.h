// Where an episode's tokens meet text (rollout/episode_rollout.h): when a model turn ends in a tool call, what
// the call is, and the tokens of the environment's answer as the chat template renders a tool message.
//   ChatToolCodec   a tokenizer and its chat template: a turn ends when its text reaches the tool-call end
//                   marker (Hermes / Qwen `</tool_call>`); the JSON after the last start marker is the call;
//                   the answer is the text the template puts after an assistant message when a tool message
//                   and the generation prompt follow it (Qwen: "<|im_end|>\n<|im_start|>user\n<tool_response>
//                   \n{content}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"), found once by rendering
//                   a probe conversation, so no template is edited. Assumes the template writes an assistant
//                   message's content verbatim (FormatError at construction otherwise).
//   FixedTurnCodec  a synthetic workload for tests and benchmarks on any model, tokenizer or none: every turn
//                   is a tool call after turn_tokens tokens, and the answer's bytes are its tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::posttrain {
class ExampleEncoder;
}

namespace lathe::rollout {

class EpisodeCodec {
 public:
  virtual ~EpisodeCodec() = default;
  // Whether the turn's tokens so far end in a tool call: the turn stops there and the environment answers.
  virtual bool ends_tool_call(std::span<const int32_t> turn) const = 0;
  // The text of tokens (special tokens kept: the markers may be special tokens).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The call in a tool-calling turn's text: {"name", "arguments"}, or null when it is not such JSON.
  virtual nlohmann::json parse_call(const std::string& turn_text) const = 0;
  // The tokens after a tool-calling turn: the tool message holding `content`, then the next assistant header.
  virtual std::vector<int32_t> observation(const std::string& content) const = 0;
};

class ChatToolCodec final : public EpisodeCodec {
 public:
  // FormatError naming the markers when the template does not render a tool message after an assistant turn
  // as described above.
  ChatToolCodec(std::shared_ptr<const posttrain::ExampleEncoder> encoder, std::string tool_call_start,
                std::string tool_call_end);
  bool ends_tool_call(std::span<const int32_t> turn) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  nlohmann::json parse_call(const std::string& turn_text) const override;
  std::vector<int32_t> observation(const std::string& content) const override;
  // The text around the content of an observation.
  const std::string& observation_head() const { return head_; }
  const std::string& observation_tail() const { return tail_; }

 private:
  std::shared_ptr<const posttrain::ExampleEncoder> enc_;
  std::string start_, end_;
  std::string head_, tail_;
};

class FixedTurnCodec final : public EpisodeCodec {
 public:
  // turn_tokens >= 1; vocab: the model's vocabulary size (the answer's byte b is token b mod vocab).
  FixedTurnCodec(int64_t turn_tokens, int64_t vocab);
  bool ends_tool_call(std::span<const int32_t> turn) const override {
    return static_cast<int64_t>(turn.size()) >= turn_tokens_;
  }
  std::string decode(std::span<const int32_t> ids) const override;  // "12 5 7": the ids
  nlohmann::json parse_call(const std::string&) const override { return nullptr; }
  std::vector<int32_t> observation(const std::string& content) const override;

 private:
  int64_t turn_tokens_, vocab_;
};

}  // namespace lathe::rollout
