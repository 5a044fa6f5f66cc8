// Golden tests: the real chat templates of Qwen3, Gemma 3 and Llama 3 (tokenizer_config.json from
// LATHE_TOKENIZERS, default ~/.cache/lathe/tokenizers) must render every fixture conversation
// byte for byte as transformers does; llama2's config has no template and must fail.
#include "lathe/io/jinja/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "lathe/io/test_paths.h"

namespace lathe::jinja {
namespace {

using nlohmann::ordered_json;


std::optional<ordered_json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return ordered_json::parse(in);  // ordered: tojson must print keys in file order
}

// tokenizer_config.json without added_tokens_decoder (Gemma 3's has 6k entries, which
// ordered_json's linear key lookup makes slow to load; the template never reads it).
std::optional<ordered_json> read_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  nlohmann::json config = nlohmann::json::parse(in);
  config.erase("added_tokens_decoder");
  return ordered_json::parse(config.dump());
}

class ChatTemplateFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateFixture, MatchesTransformersRendering) {
  const std::string name = GetParam();
  const auto cases = read_json(std::filesystem::path(testing::fixtures_root()) / "tokenizers" / name /
                               "chat_template_cases.json");
  if (!cases) GTEST_SKIP() << "no chat_template_cases.json for " << name << " under " << testing::fixtures_root();
  const auto config = read_config(std::filesystem::path(testing::tokenizers_root()) / name / "tokenizer_config.json");
  if (!config) GTEST_SKIP() << "no tokenizer_config.json for " << name << " under " << testing::tokenizers_root();

  int checked = 0;
  for (const auto& c : (*cases)["cases"]) {
    ChatRequest req;
    req.messages = c["messages"];
    req.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (c.contains("kwargs")) req.extra = c["kwargs"];
    SCOPED_TRACE(name + " case " + std::to_string(checked) + ": " + c.dump().substr(0, 200));
    if (c.contains("rendered")) {
      EXPECT_EQ(apply_chat_template(*config, req), c["rendered"].get<std::string>());
    } else {
      ASSERT_TRUE(c.contains("error"));
      try {
        apply_chat_template(*config, req);
        ADD_FAILURE() << "expected an error like: " << c["error"].get<std::string>();
      } catch (const ChatTemplateError& e) {
        EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kNoTemplate) << e.what();
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 8);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ChatTemplateFixture, ::testing::Values("qwen3", "gemma3", "llama3", "llama2"));

TEST(ChatTemplateConfig, SelectsNamedTemplatesAndSpecialTokens) {
  const ordered_json config = ordered_json::parse(R"({
    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
    "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null,
    "additional_special_tokens": ["<a>", {"content": "<b>"}]})");
  EXPECT_EQ(select_chat_template(config).value(), "D");
  EXPECT_EQ(select_chat_template(config, "tool_use").value(), "T");
  EXPECT_FALSE(select_chat_template(config, "rag").has_value());
  const ordered_json vars = special_token_variables(config);
  EXPECT_EQ(vars["bos_token"], "<s>");
  EXPECT_EQ(vars["eos_token"], "</s>");
  EXPECT_FALSE(vars.contains("pad_token"));
  EXPECT_EQ(vars["additional_special_tokens"], ordered_json::parse(R"(["<a>", "<b>"])"));
}

TEST(ChatTemplateConfig, ExtraKwargsOverrideAndReachTheTemplate) {
  const ordered_json config = {{"chat_template", "{{ bos_token }}{{ messages|length }}{{ add_generation_prompt }}{{ foo }}"},
                               {"bos_token", "<s>"}};
  ChatRequest req;
  req.messages = ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  req.add_generation_prompt = true;
  req.extra = {{"foo", "bar"}, {"bos_token", "<B>"}};
  EXPECT_EQ(apply_chat_template(config, req), "<B>1Truebar");
}

TEST(ChatTemplateConfig, MissingTemplateIsAnError) {
  try {
    apply_chat_template(ordered_json::object(), ChatRequest{});
    FAIL() << "no exception";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(e.kind(), ChatTemplateError::Kind::kNoTemplate);
  }
}

}  // namespace
}  // namespace lathe::jinja
