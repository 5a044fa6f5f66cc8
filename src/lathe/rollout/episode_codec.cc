#include "lathe/rollout/episode_codec.h"

#include <algorithm>

#include "lathe/base/error.h"
#include "lathe/posttrain/example_encoder.h"

namespace lathe::rollout {

namespace {

// Probe strings that no template writes by itself.
constexpr const char* kAssistantProbe = "\x1f" "lathe assistant probe" "\x1f";
constexpr const char* kContentProbe = "\x1f" "lathe tool content probe" "\x1f";

}  // namespace

ChatToolCodec::ChatToolCodec(std::shared_ptr<const posttrain::ExampleEncoder> encoder, std::string tool_call_start,
                             std::string tool_call_end)
    : enc_(std::move(encoder)), start_(std::move(tool_call_start)), end_(std::move(tool_call_end)) {
  LATHE_CHECK_ARG(enc_ != nullptr, "[ChatToolCodec] no encoder");
  LATHE_CHECK_ARG(!end_.empty(), "[ChatToolCodec] the tool-call end marker is empty");
  const nlohmann::ordered_json messages = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "probe"}},
       {{"role", "assistant"}, {"content", kAssistantProbe}},
       {{"role", "tool"}, {"content", kContentProbe}}});
  const std::string text = enc_->render(messages, /*add_generation_prompt=*/true, nullptr);
  const size_t a = text.find(kAssistantProbe);
  const size_t c = a == std::string::npos ? a : text.find(kContentProbe, a);
  LATHE_CHECK_FORMAT(a != std::string::npos && c != std::string::npos,
                     "[grpo.environment] the chat template does not render an assistant message's content verbatim"
                     " followed by a tool message's (rendered: ", text.substr(0, 400), ")");
  head_ = text.substr(a + std::string(kAssistantProbe).size(), c - a - std::string(kAssistantProbe).size());
  tail_ = text.substr(c + std::string(kContentProbe).size());
}

bool ChatToolCodec::ends_tool_call(std::span<const int32_t> turn) const {
  // Every token decodes to at least one byte, so the marker lies within the turn's last end_.size() tokens.
  const size_t k = std::min(turn.size(), end_.size());
  return decode(turn.subspan(turn.size() - k)).find(end_) != std::string::npos;
}

std::string ChatToolCodec::decode(std::span<const int32_t> ids) const {
  const std::vector<uint32_t> u(ids.begin(), ids.end());
  return enc_->tokenizer().decode(u, /*skip_special_tokens=*/false);
}

nlohmann::json ChatToolCodec::parse_call(const std::string& turn_text) const {
  const size_t e = turn_text.rfind(end_);
  if (e == std::string::npos) return nullptr;
  const size_t s = start_.empty() ? std::string::npos : turn_text.rfind(start_, e);
  const size_t from = s == std::string::npos ? 0 : s + start_.size();
  nlohmann::json j = nlohmann::json::parse(turn_text.substr(from, e - from), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return nullptr;
  return j;
}

std::vector<int32_t> ChatToolCodec::observation(const std::string& content) const {
  const std::vector<uint32_t> ids = enc_->tokenizer().encode_ids(head_ + content + tail_, /*add_special_tokens=*/false);
  return {ids.begin(), ids.end()};
}

FixedTurnCodec::FixedTurnCodec(int64_t turn_tokens, int64_t vocab) : turn_tokens_(turn_tokens), vocab_(vocab) {
  LATHE_CHECK_ARG(turn_tokens >= 1 && vocab >= 1, "[FixedTurnCodec] need turn_tokens >= 1 and vocab >= 1, got ",
                  turn_tokens, " and ", vocab);
}

std::string FixedTurnCodec::decode(std::span<const int32_t> ids) const {
  std::string s;
  for (int32_t t : ids) s += (s.empty() ? "" : " ") + std::to_string(t);
  return s;
}

std::vector<int32_t> FixedTurnCodec::observation(const std::string& content) const {
  std::vector<int32_t> ids;
  for (unsigned char b : content) ids.push_back(static_cast<int32_t>(b % vocab_));
  return ids;
}

}  // namespace lathe::rollout
