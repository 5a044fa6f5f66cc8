// Response and SSE serialisation: the OpenAI shapes of completion, chat.completion and their chunks,
// the role chunk, tool-call deltas, logprobs, usage chunk semantics and [DONE] (serving spec §9).
#include "lathe/serve/http/response.h"

#include <gtest/gtest.h>

#include <limits>

namespace lathe::serve {
namespace {

// The JSON objects of an SSE text, and whether it ended with [DONE].
struct Events {
  std::vector<nlohmann::json> chunks;
  bool done = false;
};
Events parse_sse(const std::string& sse) {
  Events ev;
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated event";
    std::string line = sse.substr(pos, end - pos);
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    std::string data = line.substr(6);
    EXPECT_FALSE(ev.done) << "event after [DONE]";
    if (data == "[DONE]") ev.done = true;
    else ev.chunks.push_back(nlohmann::json::parse(data));
    pos = end + 2;
  }
  return ev;
}

ResponseMeta meta(Endpoint e, int n = 1, bool logprobs = false) {
  return {.endpoint = e, .id = e == Endpoint::kCompletions ? "cmpl-1" : "chatcmpl-1", .created = 1700000000,
          .model = "tiny", .n_choices = n, .logprobs = logprobs};
}

GenerationOutput text_event(int index, std::string text, std::optional<std::string> finish = std::nullopt) {
  GenerationOutput out;
  out.choices.push_back({.index = index, .text = std::move(text), .finish_reason = std::move(finish)});
  return out;
}

TEST(StreamEncoder, ChatChunksRoleDeltaFinishDone) {
  StreamEncoder enc(meta(Endpoint::kChatCompletions), {});
  Events a = parse_sse(enc.encode(text_event(0, "Hel")));
  ASSERT_EQ(a.chunks.size(), 2u);  // the role chunk, then the content
  EXPECT_EQ(a.chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(a.chunks[0]["id"], "chatcmpl-1");
  EXPECT_EQ(a.chunks[0]["created"], 1700000000);
  EXPECT_EQ(a.chunks[0]["choices"][0]["delta"], (nlohmann::json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(a.chunks[1]["choices"][0]["delta"], (nlohmann::json{{"content", "Hel"}}));
  EXPECT_TRUE(a.chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(a.chunks[1].contains("usage"));  // no include_usage: no usage field at all
  EXPECT_FALSE(a.done);
  GenerationOutput last = text_event(0, "lo", "length");
  last.finished = true;
  last.usage = {.prompt_tokens = 3, .completion_tokens = 2};
  Events b = parse_sse(enc.encode(last));
  ASSERT_EQ(b.chunks.size(), 1u);  // no second role chunk, no usage chunk
  EXPECT_EQ(b.chunks[0]["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(b.done);
}

TEST(StreamEncoder, IncludeUsage) {
  StreamEncoder enc(meta(Endpoint::kCompletions), {.include_usage = true});
  Events a = parse_sse(enc.encode(text_event(0, "x")));
  ASSERT_EQ(a.chunks.size(), 1u);
  EXPECT_EQ(a.chunks[0]["object"], "text_completion");
  EXPECT_EQ(a.chunks[0]["choices"][0]["text"], "x");
  EXPECT_TRUE(a.chunks[0].contains("usage") && a.chunks[0]["usage"].is_null());
  GenerationOutput last = text_event(0, "", "stop");
  last.finished = true;
  last.usage = {.prompt_tokens = 4, .completion_tokens = 1, .cached_tokens = 2};
  Events b = parse_sse(enc.encode(last));
  ASSERT_EQ(b.chunks.size(), 2u);
  EXPECT_TRUE(b.chunks[0]["usage"].is_null());
  EXPECT_EQ(b.chunks[1]["choices"], nlohmann::json::array());  // the usage chunk has no choices
  EXPECT_EQ(b.chunks[1]["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(b.chunks[1]["usage"]["completion_tokens"], 1);
  EXPECT_EQ(b.chunks[1]["usage"]["total_tokens"], 5);
  EXPECT_EQ(b.chunks[1]["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_TRUE(b.done);
}

TEST(StreamEncoder, ToolCallDeltas) {
  StreamEncoder enc(meta(Endpoint::kChatCompletions), {});
  GenerationOutput first;
  first.choices.push_back({.index = 0, .tool_calls = {{.index = 0, .id = "call_7", .name = "get_weather", .arguments = ""}}});
  Events a = parse_sse(enc.encode(first));
  ASSERT_EQ(a.chunks.size(), 2u);
  nlohmann::json call = a.chunks[1]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(call["index"], 0);
  EXPECT_EQ(call["id"], "call_7");
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "");
  GenerationOutput more;
  more.choices.push_back({.index = 0, .tool_calls = {{.index = 0, .arguments = "{\"city\""}}, .finish_reason = "tool_calls"});
  Events b = parse_sse(enc.encode(more));
  nlohmann::json frag = b.chunks[0]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(frag, (nlohmann::json{{"index", 0}, {"function", {{"arguments", "{\"city\""}}}}));
  EXPECT_EQ(b.chunks[0]["choices"][0]["finish_reason"], "tool_calls");
}

TEST(StreamEncoder, MidStreamErrorThenDone) {
  StreamEncoder enc(meta(Endpoint::kChatCompletions), {.include_usage = true});
  GenerationOutput err;
  err.finished = true;
  err.error = server_error("engine failed");
  Events e = parse_sse(enc.encode(err));
  ASSERT_EQ(e.chunks.size(), 1u);
  EXPECT_EQ(e.chunks[0]["error"]["type"], "server_error");
  EXPECT_EQ(e.chunks[0]["error"]["message"], "engine failed");
  EXPECT_TRUE(e.done);
}

TEST(StreamEncoder, CompletionLogprobsOffsets) {
  StreamEncoder enc(meta(Endpoint::kCompletions, 1, true), {});
  GenerationOutput a = text_event(0, "ab");
  a.choices[0].logprobs = {{.token = "a", .logprob = -0.5f, .top = {{"a", -0.5f}, {"b", -1.5f}}},
                           {.token = "b", .logprob = -1.0f}};
  Events ea = parse_sse(enc.encode(a));
  nlohmann::json lp = ea.chunks[0]["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], (nlohmann::json{"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"][0], -0.5);
  EXPECT_EQ(lp["top_logprobs"][0]["b"], -1.5);
  EXPECT_EQ(lp["text_offset"], (nlohmann::json{0, 1}));
  GenerationOutput b = text_event(0, "c");
  b.choices[0].logprobs = {{.token = "c", .logprob = -std::numeric_limits<float>::infinity()}};
  nlohmann::json lp2 = parse_sse(enc.encode(b)).chunks[0]["choices"][0]["logprobs"];
  EXPECT_EQ(lp2["text_offset"], nlohmann::json{2});  // continues after "ab"
  EXPECT_EQ(lp2["token_logprobs"][0], -9999.0);       // -inf clamped (vLLM)
}

TEST(StreamEncoder, CompletionTopLogprobsKeepTheirOrderBestFirst) {
  // A JSON object of alternatives: clients read them in the order sent, the most likely first (vLLM),
  // not sorted by token text.
  StreamEncoder enc(meta(Endpoint::kCompletions, 1, true), {});
  GenerationOutput a = text_event(0, "z");
  a.choices[0].logprobs = {{.token = "z", .logprob = -0.1f, .top = {{"z", -0.1f}, {"m", -2.0f}, {"a", -3.0f}}}};
  const std::string sse = enc.encode(a);
  ASSERT_EQ(sse.rfind("data: ", 0), 0u) << sse;
  const nlohmann::ordered_json chunk = nlohmann::ordered_json::parse(sse.substr(6, sse.find("\n\n") - 6));
  std::vector<std::string> keys;
  for (const auto& [k, v] : chunk["choices"][0]["logprobs"]["top_logprobs"][0].items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "m", "a"}));
}

TEST(ResponseBuilder, ChatCompletion) {
  ResponseBuilder b(meta(Endpoint::kChatCompletions, 2, true));
  GenerationOutput a;
  a.choices.push_back({.index = 1, .text = "B"});
  a.choices.push_back({.index = 0, .text = "A1", .logprobs = {{.token = "A1", .logprob = -0.25f, .top = {{"A1", -0.25f}}}}});
  b.add(a);
  GenerationOutput c;
  c.choices.push_back({.index = 1, .tool_calls = {{.index = 0, .id = "call_1", .name = "f", .arguments = "{\"x\":"}}});
  c.usage = {.prompt_tokens = 5, .completion_tokens = 2};  // running totals: only the finished event's count
  b.add(c);
  GenerationOutput d;  // the next fragment of the same call (merged by index)
  d.choices.push_back({.index = 0, .text = "A2", .finish_reason = "length"});
  d.choices.push_back({.index = 1, .tool_calls = {{.index = 0, .arguments = "1}"}}, .finish_reason = "tool_calls"});
  d.finished = true;
  d.usage = {.prompt_tokens = 5, .completion_tokens = 4};
  b.add(d);
  nlohmann::ordered_json j = b.build();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "A1A2");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["token"], "A1");
  EXPECT_EQ(j["choices"][0]["logprobs"]["content"][0]["bytes"], (nlohmann::ordered_json{65, 49}));
  EXPECT_EQ(j["choices"][1]["message"]["content"], "B");  // text said before the call is kept
  EXPECT_EQ(j["choices"][1]["message"]["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
  EXPECT_EQ(j["choices"][1]["finish_reason"], "tool_calls");
  EXPECT_EQ(j["usage"]["total_tokens"], 9);
}

TEST(ResponseBuilder, CompletionAndToolOnlyContent) {
  ResponseBuilder b(meta(Endpoint::kCompletions));
  GenerationOutput a = text_event(0, "hello", "stop");
  a.finished = true;
  b.add(a);
  nlohmann::ordered_json j = b.build();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  ResponseBuilder t(meta(Endpoint::kChatCompletions));
  GenerationOutput call;
  call.choices.push_back({.index = 0, .tool_calls = {{.index = 0, .id = "call_2", .name = "f", .arguments = "{}"}},
                          .finish_reason = "tool_calls"});
  t.add(call);
  EXPECT_TRUE(t.build()["choices"][0]["message"]["content"].is_null());  // only a tool call: null content
}

// vLLM's shapes: completions put [null, {"<id>": {logprob, rank, decoded_token}}, ...] on each choice,
// chat beside the choices; absent unless asked for; -inf is clamped as for logprobs.
TEST(ResponseBuilder, PromptLogprobs) {
  const std::vector<PromptPositionLogprobs> lps = {
      {{.token_id = 7, .token = " a", .logprob = -0.5f, .rank = 1}, {.token_id = 9, .token = "b", .logprob = -2.f, .rank = 4}},
      {{.token_id = 3, .token = "c", .logprob = -std::numeric_limits<float>::infinity(), .rank = 2}}};
  for (const Endpoint e : {Endpoint::kCompletions, Endpoint::kChatCompletions}) {
    ResponseMeta m = meta(e, 2);
    m.prompt_logprobs = true;
    ResponseBuilder b(m);
    GenerationOutput out;
    for (int i = 0; i < 2; ++i) {
      ChoiceDelta d{.index = i, .text = "x", .finish_reason = "length"};
      d.prompt_logprobs = lps;
      out.choices.push_back(d);
    }
    out.finished = true;
    b.add(out);
    const nlohmann::json j = nlohmann::json::parse(b.build().dump());
    const nlohmann::json& p = e == Endpoint::kCompletions ? j["choices"][1]["prompt_logprobs"] : j["prompt_logprobs"];
    ASSERT_TRUE(p.is_array()) << j.dump();
    ASSERT_EQ(p.size(), 3u);
    EXPECT_TRUE(p[0].is_null());
    EXPECT_EQ(p[1], (nlohmann::json{{"7", {{"logprob", -0.5}, {"rank", 1}, {"decoded_token", " a"}}},
                                    {"9", {{"logprob", -2.0}, {"rank", 4}, {"decoded_token", "b"}}}}));
    EXPECT_EQ(p[2]["3"]["logprob"], -9999.0);
    EXPECT_EQ(j["choices"][0].contains("prompt_logprobs"), e == Endpoint::kCompletions);
    EXPECT_EQ(j.contains("prompt_logprobs"), e != Endpoint::kCompletions);
  }
  ResponseBuilder plain(meta(Endpoint::kCompletions));
  plain.add(text_event(0, "x", "stop"));
  EXPECT_FALSE(plain.build()["choices"][0].contains("prompt_logprobs"));
}

TEST(Models, ListShape) {
  nlohmann::ordered_json j = models_response({"tiny", "alias"}, 1700000000, 512);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["id"], "alias");
  EXPECT_EQ(j["data"][1]["object"], "model");
  EXPECT_EQ(j["data"][1]["owned_by"], "lathe");
  EXPECT_EQ(j["data"][1]["max_model_len"], 512);
  EXPECT_TRUE(j["data"][1]["parent"].is_null());
  // LoRA adapters follow the base, with it as parent and their folder as root (vLLM's cards).
  j = models_response({"tiny"}, 1700000000, 512, {{.name = "sql", .path = "/adapters/sql"}});
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["id"], "sql");
  EXPECT_EQ(j["data"][1]["parent"], "tiny");
  EXPECT_EQ(j["data"][1]["root"], "/adapters/sql");
}

TEST(Sse, InvalidUtf8InTextIsReplacedNotThrown) {
  std::string sse = sse_event(nlohmann::ordered_json{{"text", std::string("a\xC3")}});
  EXPECT_NO_THROW(nlohmann::json::parse(sse.substr(6)));
}

}  // namespace
}  // namespace lathe::serve
