// ChatToolCodec with the real Qwen3 tokenizer and chat template (LATHE_TOKENIZERS; skipped without it): a prompt,
// the model's tool-calling turn and the observation's tokens together are the template's rendering of the
// conversation with the tool message and the next generation prompt; the turn ends at </tool_call> (a special
// token), the call is parsed from between the markers; FixedTurnCodec's layout.
#include "lathe/rollout/episode_codec.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lathe/io/test_paths.h"
#include "lathe/posttrain/example_encoder.h"

namespace lathe::rollout {
namespace {

using nlohmann::ordered_json;

std::shared_ptr<const posttrain::ExampleEncoder> qwen3_encoder() {
  const std::string dir = testing::tokenizers_root() + "/qwen3";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) return nullptr;
  return std::make_shared<posttrain::ExampleEncoder>(tokenizer::read_tokenizer_files(dir), posttrain::EncoderOptions{});
}

std::vector<int32_t> ids(const posttrain::ExampleEncoder& enc, const std::string& text) {
  const std::vector<uint32_t> u = enc.tokenizer().encode_ids(text, false);
  return {u.begin(), u.end()};
}

TEST(ChatToolCodec, PromptTurnAndObservationAreTheTemplatesConversation) {
  const std::shared_ptr<const posttrain::ExampleEncoder> enc = qwen3_encoder();
  if (!enc) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  const ChatToolCodec codec(enc, "<tool_call>", "</tool_call>");
  const std::string turn =
      "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6 * 7\"}}\n</tool_call>";
  const std::string answer = "42";
  const ordered_json user = {{"role", "user"}, {"content", "What is 6 * 7?"}};
  const std::string prompt = enc->render(ordered_json::array({user}), true, nullptr);
  const std::string full = enc->render(
      ordered_json::array({user, {{"role", "assistant"}, {"content", turn}}, {{"role", "tool"}, {"content", answer}}}),
      true, nullptr);
  // Token by token: prompt, the model's turn, the observation = the whole conversation's tokens.
  std::vector<int32_t> got = ids(*enc, prompt);
  const std::vector<int32_t> turn_ids = ids(*enc, turn);
  got.insert(got.end(), turn_ids.begin(), turn_ids.end());
  const std::vector<int32_t> obs = codec.observation(answer);
  got.insert(got.end(), obs.begin(), obs.end());
  EXPECT_EQ(got, ids(*enc, full));
  EXPECT_EQ(codec.decode(obs), codec.observation_head() + answer + codec.observation_tail());
  EXPECT_NE(codec.observation_head().find("<tool_response>"), std::string::npos);

  // The turn ends on its last token (</tool_call>), not before.
  for (size_t n = 1; n <= turn_ids.size(); ++n)
    EXPECT_EQ(codec.ends_tool_call(std::span<const int32_t>(turn_ids.data(), n)), n == turn_ids.size()) << n;
  EXPECT_EQ(codec.parse_call(codec.decode(turn_ids)),
            (nlohmann::json{{"name", "calculator"}, {"arguments", {{"expression", "6 * 7"}}}}));
  EXPECT_TRUE(codec.parse_call("<tool_call>\nnot json\n</tool_call>").is_null());
  EXPECT_TRUE(codec.parse_call("<tool_call>[1, 2]</tool_call>").is_null());
}

TEST(FixedTurnCodec, EveryTurnCallsAfterItsTokensAndAnswersAreBytes) {
  const FixedTurnCodec codec(3, 100);
  const std::vector<int32_t> turn = {5, 17, 99};
  EXPECT_FALSE(codec.ends_tool_call(std::span<const int32_t>(turn.data(), 2)));
  EXPECT_TRUE(codec.ends_tool_call(turn));
  EXPECT_EQ(codec.decode(turn), "5 17 99");
  const std::string content = "ab~";
  std::vector<int32_t> want;
  for (unsigned char c : content) want.push_back(c % 100);
  EXPECT_EQ(codec.observation(content), want);
}

}  // namespace
}  // namespace lathe::rollout
