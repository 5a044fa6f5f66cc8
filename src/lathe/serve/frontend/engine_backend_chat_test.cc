// EngineBackend's chat completions on the random Qwen3 text model with the real Qwen3 tokenizer and chat
// template: the prompt is the rendered template tokenised without added special tokens (checked by
// rendering it here), chat_template_kwargs, tools and continue_final_message reach the template, the
// default max_tokens is the rest of the context, top_logprobs, and the chat-only refusals.
#include <gtest/gtest.h>

#include "lathe/io/jinja/chat_template.h"
#include "lathe/serve/frontend/chat_prompt.h"
#include "lathe/serve/frontend/frontend_test_util.h"
#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

using testing::BackendFixture;
using testing::BackendResult;

const nlohmann::json kMessages = nlohmann::json::array(
    {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Name a colour."}}});

// The prompt's token count as transformers would make it: render, then tokenise without special tokens.
int64_t rendered_tokens(const BackendFixture& f, const nlohmann::json& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) {
  jinja::ChatRequest req{.messages = nlohmann::ordered_json::parse(messages.dump()),
                         .add_generation_prompt = add_generation_prompt, .extra = extra};
  return static_cast<int64_t>(f.encode(jinja::apply_chat_template(f.tokenizer_config, req), false).size());
}

TEST(EngineBackendChat, PromptIsTheRenderedTemplate) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const BackendResult r = f.run({{"messages", kMessages}, {"max_tokens", 4}, {"ignore_eos", true}});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.usage.prompt_tokens, rendered_tokens(f, kMessages, true));
  EXPECT_EQ(r.usage.completion_tokens, 4);
  EXPECT_EQ(r.finish.at(0), "length");
  // chat_template_kwargs reach the template (Qwen3 writes an empty think block when thinking is off).
  const BackendResult off = f.run({{"messages", kMessages}, {"max_tokens", 1}, {"ignore_eos", true},
                                   {"chat_template_kwargs", {{"enable_thinking", false}}}});
  EXPECT_EQ(off.usage.prompt_tokens, rendered_tokens(f, kMessages, true, {{"enable_thinking", false}}));
  EXPECT_GT(off.usage.prompt_tokens, r.usage.prompt_tokens);
  // So do tools (the Qwen3 tool-call parser reads the output: ChoicePipeline tests).
  const nlohmann::json tools = nlohmann::json::array(
      {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"description", "Weather in a city"}}}}});
  const BackendResult with_tools =
      f.run({{"messages", kMessages}, {"max_tokens", 1}, {"ignore_eos", true}, {"tools", tools}, {"tool_choice", "auto"}});
  EXPECT_EQ(with_tools.usage.prompt_tokens,
            rendered_tokens(f, kMessages, true, {{"tools", nlohmann::ordered_json::parse(tools.dump())}}));
}

TEST(EngineBackendChat, DefaultMaxTokensIsTheRestOfTheContext) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const BackendResult r = f.run({{"messages", kMessages}, {"temperature", 0}, {"ignore_eos", true}});
  EXPECT_EQ(r.usage.prompt_tokens + r.usage.completion_tokens, testing::kTestMaxModelLen);
  EXPECT_EQ(r.finish.at(0), "length");
}

TEST(EngineBackendChat, ContinueFinalMessageContinuesIt) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  nlohmann::json messages = kMessages;
  messages.push_back({{"role", "assistant"}, {"content", "My favourite colour is"}});
  const BackendResult r = f.run({{"messages", messages}, {"max_tokens", 1}, {"ignore_eos", true},
                                 {"add_generation_prompt", false}, {"continue_final_message", true}});
  ASSERT_FALSE(r.error) << r.error->message;
  // The rendering without the final message's end of turn: the full rendering minus "<|im_end|>\n".
  EXPECT_EQ(r.usage.prompt_tokens, rendered_tokens(f, messages, false) - 2);
}

TEST(EngineBackendChat, CutAfterFinalMessageFollowsTransformers) {
  EXPECT_EQ(cut_after_final_message("<s>user\nhi</s><s>assistant\nThe answer</s>\n", "The answer"),
            "<s>user\nhi</s><s>assistant\nThe answer");
  // A template that strips the message: the cut keeps what it wrote.
  EXPECT_EQ(cut_after_final_message("A: The answer</s>", "The answer  "), "A: The answer");
  EXPECT_EQ(cut_after_final_message("A: something else", "The answer"), std::nullopt);
}

TEST(EngineBackendChat, TopLogprobsGivesThatManyAlternatives) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const BackendResult r = f.run({{"messages", kMessages}, {"max_tokens", 3}, {"ignore_eos", true}, {"logprobs", true},
                                 {"top_logprobs", 2}, {"n", 2}, {"seed", 1}});
  ASSERT_EQ(r.logprobs.size(), 2u);
  for (const auto& [index, lps] : r.logprobs) {
    ASSERT_EQ(lps.size(), 3u) << "choice " << index;
    for (const TokenLogprob& t : lps) {
      ASSERT_EQ(t.top.size(), 2u);
      EXPECT_GE(t.top[0].logprob, t.top[1].logprob);
      EXPECT_LE(t.logprob, t.top[0].logprob);
    }
  }
  EXPECT_EQ(r.usage.completion_tokens, 6);
}

TEST(EngineBackendChat, TextPartsAreJoinedAndOtherPartsRefused) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const nlohmann::json parts = nlohmann::json::array(
      {{{"role", "user"},
        {"content", {{{"type", "text"}, {"text", "Name"}}, {{"type", "text"}, {"text", "a colour."}}}}}});
  const nlohmann::json joined = nlohmann::json::array({{{"role", "user"}, {"content", "Name\na colour."}}});
  const BackendResult r = f.run({{"messages", parts}, {"max_tokens", 1}, {"ignore_eos", true}});
  EXPECT_EQ(r.usage.prompt_tokens, rendered_tokens(f, joined, true));

  nlohmann::json image = parts;
  image[0]["content"][1] = {{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}};
  try {
    f.run({{"messages", image}});
    FAIL() << "an image part was accepted";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().param, "messages[0].content[1]");
  }
}

TEST(EngineBackendChat, ToolChoiceThatNeedsAGrammarIsRefused) {
  LATHE_NEED_TOKENIZER();
  BackendFixture f(testing::qwen3_text_model_dir());
  const nlohmann::json tools =
      nlohmann::json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", nlohmann::json::object()}}}}});
  for (const nlohmann::json& choice : {nlohmann::json("required"),
                                       nlohmann::json({{"type", "function"}, {"function", {{"name", "f"}}}})}) {
    try {
      f.run({{"messages", kMessages}, {"tools", tools}, {"tool_choice", choice}});
      FAIL() << "tool_choice " << choice.dump() << " was accepted";
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().param, "tool_choice");
      EXPECT_EQ(e.error().status, 400);
    }
  }
  try {
    f.run({{"messages", kMessages}, {"response_format", {{"type", "json_object"}}}});
    FAIL() << "json_object was accepted";
  } catch (const ApiException& e) {
    EXPECT_EQ(e.error().param, "response_format");
  }
}

}  // namespace
}  // namespace lathe::serve
