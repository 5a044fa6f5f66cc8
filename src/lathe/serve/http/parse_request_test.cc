// Request parsing and validation: each field's type and range, the OpenAI aliases, and each error case
// of issue 12's reliability list that belongs to the protocol layer, with its status/type/param/code.
#include "lathe/serve/http/parse_request.h"

#include <gtest/gtest.h>

#include "lathe/serve/http/api_error.h"

namespace lathe::serve {
namespace {

RequestLimits limits() {
  return {.served_models = {"tiny", "tiny-alias"}, .max_model_len = 512, .vocab_size = 1000, .max_n = 4};
}

ApiError completion_error(const std::string& body, RequestLimits l = limits()) {
  try {
    parse_completion_request(body, l);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no error for " << body;
  return {};
}

ApiError chat_error(const std::string& body, RequestLimits l = limits()) {
  try {
    parse_chat_completion_request(body, l);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no error for " << body;
  return {};
}

TEST(ParseRequest, CompletionFieldsAndDefaults) {
  CompletionRequest r = parse_completion_request(R"({"prompt": "hi"})", limits());
  EXPECT_EQ(r.common.model, "tiny");  // the default served name
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(std::get<std::string>(r.prompts[0]), "hi");
  EXPECT_EQ(r.sampling.max_tokens, 16);  // OpenAI's completions default
  EXPECT_EQ(r.sampling.n, 1);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.sampling.logprobs.has_value());
  EXPECT_FALSE(r.sampling.allowed_token_ids.has_value());
  EXPECT_FALSE(r.common.stream);

  r = parse_completion_request(R"({"model": "tiny-alias", "prompt": [[1, 2], "x", [3]], "max_tokens": 7, "n": 2,
      "temperature": 0, "top_p": 0.5, "top_k": 5, "min_p": 0.1, "presence_penalty": -2, "frequency_penalty": 1.5,
      "repetition_penalty": 1.1, "logit_bias": {"5": -100, "7": 3}, "stop": "END", "stop_token_ids": [2],
      "seed": -3, "logprobs": 3, "echo": true, "allowed_token_ids": [4, 999], "bad_words": ["a b", "c"], "ignore_eos": true, "min_tokens": 2, "stream": true,
      "stream_options": {"include_usage": true}, "user": "u1", "cache_salt": "s", "priority": 1, "top_logprobs": null})",
                              limits());
  EXPECT_EQ(r.common.model, "tiny-alias");
  ASSERT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(std::get<std::vector<int32_t>>(r.prompts[0]), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(std::get<std::string>(r.prompts[1]), "x");
  EXPECT_EQ(r.sampling.max_tokens, 7);
  EXPECT_EQ(r.sampling.n, 2);
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_k, 5);
  EXPECT_EQ(r.sampling.logit_bias.at(5), -100.0f);
  EXPECT_EQ(r.sampling.logit_bias.at(7), 3.0f);
  EXPECT_EQ(r.sampling.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.sampling.stop_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(r.sampling.seed, -3);
  ASSERT_TRUE(r.sampling.allowed_token_ids);
  EXPECT_EQ(*r.sampling.allowed_token_ids, (std::vector<int32_t>{4, 999}));
  EXPECT_EQ(r.sampling.bad_words, (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(r.sampling.logprobs, 3);
  EXPECT_TRUE(r.echo && r.sampling.ignore_eos && r.common.stream && r.common.include_usage);
  EXPECT_EQ(r.common.user, "u1");
  EXPECT_EQ(r.common.cache_salt, "s");
  // top_logprobs is a chat field: unknown here, even as null (it is only logged).
  EXPECT_EQ(r.common.ignored_fields, std::vector<std::string>{"top_logprobs"});
}

TEST(ParseRequest, ChatFieldsAndAliases) {
  ChatCompletionRequest r = parse_chat_completion_request(
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
           "function": {"name": "f", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "42"}],
          "max_tokens": 9, "max_completion_tokens": 11, "logprobs": true, "top_logprobs": 2, "stop": ["a", "b"],
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
          "tool_choice": {"type": "function", "function": {"name": "f"}}, "chat_template_kwargs": {"enable_thinking": false}})",
      limits());
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[3].raw["tool_call_id"], "call_1");  // the whole message is kept for the template
  EXPECT_EQ(r.sampling.max_tokens, 11);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(r.sampling.logprobs, 2);
  EXPECT_EQ(r.sampling.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice["function"]["name"], "f");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.add_generation_prompt);
  // Chat's max_tokens defaults to the rest of the context: the backend decides.
  EXPECT_FALSE(parse_chat_completion_request(R"({"messages": [{"role": "user", "content": "x"}]})", limits()).sampling.max_tokens);
  // logprobs false: no logprobs.
  EXPECT_FALSE(parse_chat_completion_request(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false})", limits())
                   .sampling.logprobs);
}

TEST(ParseRequest, MalformedJsonAndInvalidUtf8) {
  ApiError e = completion_error(R"({"prompt": "hi",)");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_NE(e.message.find("not valid JSON"), std::string::npos) << e.message;
  e = completion_error("{\"prompt\": \"caf\xC3\"}");  // a lone UTF-8 lead byte
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos) << e.message;
  e = completion_error("[1, 2]");
  EXPECT_NE(e.message.find("JSON object"), std::string::npos) << e.message;
}

TEST(ParseRequest, WrongTypesNameTheField) {
  struct Case { const char* body; const char* param; };
  for (const Case& c : {Case{R"({"prompt": "x", "temperature": "hot"})", "temperature"},
                        Case{R"({"prompt": "x", "max_tokens": 2.5})", "max_tokens"},
                        Case{R"({"prompt": "x", "stream": 1})", "stream"},
                        Case{R"({"prompt": "x", "stop": [1]})", "stop"},
                        Case{R"({"prompt": 5})", "prompt"},
                        Case{R"({"prompt": [1, "a"]})", "prompt"},
                        Case{R"({"prompt": "x", "logit_bias": [1]})", "logit_bias"},
                        Case{R"({"prompt": "x", "seed": "1"})", "seed"},
                        Case{R"({"prompt": "x", "model": 3})", "model"}}) {
    ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
  }
  EXPECT_EQ(chat_error(R"({"messages": "hi"})").param, "messages");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "robot", "content": "x"}]})").param, "messages[0].role");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": 3}]})").param, "messages[0].content");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user"}]})").param, "messages[0].content");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 3})").param, "logprobs");
}

TEST(ParseRequest, RangesAreChecked) {
  struct Case { const char* body; const char* param; };
  for (const Case& c : {Case{R"({"prompt": "x", "temperature": -0.1})", "temperature"},
                        Case{R"({"prompt": "x", "top_p": 0})", "top_p"},
                        Case{R"({"prompt": "x", "top_p": 1.5})", "top_p"},
                        Case{R"({"prompt": "x", "top_k": -2})", "top_k"},
                        Case{R"({"prompt": "x", "min_p": 2})", "min_p"},
                        Case{R"({"prompt": "x", "presence_penalty": 2.5})", "presence_penalty"},
                        Case{R"({"prompt": "x", "frequency_penalty": -3})", "frequency_penalty"},
                        Case{R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
                        Case{R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
                        Case{R"({"prompt": "x", "max_tokens": 4, "min_tokens": 5})", "min_tokens"},
                        Case{R"({"prompt": "x", "logit_bias": {"5": 101}})", "logit_bias"},
                        Case{R"({"prompt": "x", "logit_bias": {"1000": 1}})", "logit_bias"},  // vocab_size 1000
                        Case{R"({"prompt": "x", "logit_bias": {"x": 1}})", "logit_bias"},
                        Case{R"({"prompt": "x", "allowed_token_ids": [1, 1000]})", "allowed_token_ids"},
                        Case{R"({"prompt": "x", "allowed_token_ids": [-1]})", "allowed_token_ids"},
                        Case{R"({"prompt": "x", "allowed_token_ids": []})", "allowed_token_ids"},
                        Case{R"({"prompt": "x", "bad_words": [3]})", "bad_words"},
                        Case{R"({"prompt": [1000]})", "prompt"},
                        Case{R"({"prompt": [[]]})", "prompt"},
                        Case{R"({"prompt": []})", "prompt"},
                        Case{R"({"prompt": "x", "logprobs": 21})", "logprobs"},
                        Case{R"({"prompt": "x", "stop": [""]})", "stop"},
                        Case{R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
                        Case{R"({"prompt": "x", "stream": true, "stream_options": {"include_usge": true}})", "stream_options"},
                        Case{R"({"prompt": "x", "best_of": 2})", "best_of"},
                        Case{R"({"prompt": "x", "suffix": "y"})", "suffix"}}) {
    ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
  }
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})").param, "top_logprobs");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]})").param,
            "tools[0].function.name");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "sometimes"})").param, "tool_choice");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})")
                .param,
            "tool_choice");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}})").param,
            "response_format");
}

TEST(ParseRequest, NTooLarge) {
  ApiError e = completion_error(R"({"prompt": "x", "n": 5})");  // max_n 4
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "n": 4})", limits()).sampling.n, 4);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "n": 0})").param, "n");
}

TEST(ParseRequest, MaxTokensOverTheContext) {
  ApiError e = completion_error(R"({"prompt": "x", "max_tokens": 513})");  // max_model_len 512
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "max_tokens");
  e = chat_error(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 100000000000})");
  EXPECT_EQ(e.status, 400);  // past int32: a range error before the context check
  EXPECT_EQ(parse_completion_request(R"({"prompt": "x", "max_tokens": 512})", limits()).sampling.max_tokens, 512);
}

TEST(ParseRequest, UnknownModelIs404) {
  ApiError e = completion_error(R"({"model": "gpt-4", "prompt": "x"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(chat_error(R"({"model": "nope", "messages": [{"role": "user", "content": "x"}]})").status, 404);
}

TEST(ParseRequest, UnknownFieldsIgnoredOrRejected) {
  const char* body = R"({"prompt": "x", "frobnicate": 1, "zeta": null})";
  CompletionRequest r = parse_completion_request(body, limits());
  EXPECT_EQ(r.common.ignored_fields, (std::vector<std::string>{"frobnicate", "zeta"}));
  RequestLimits strict = limits();
  strict.reject_unknown_fields = true;
  ApiError e = completion_error(body, strict);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "frobnicate");
  // A chat-only field on completions is unknown there.
  EXPECT_EQ(completion_error(R"({"prompt": "x", "messages": []})", strict).param, "messages");
}

TEST(ApiErrorJson, OpenAiShape) {
  nlohmann::json j = invalid_api_key().to_json();
  EXPECT_EQ(j["error"]["type"], "authentication_error");
  EXPECT_EQ(j["error"]["code"], "invalid_api_key");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_EQ(invalid_api_key().status, 401);
  EXPECT_EQ(body_too_large(10).status, 413);
  EXPECT_EQ(service_unavailable("x").status, 503);
}

}  // namespace
}  // namespace lathe::serve
