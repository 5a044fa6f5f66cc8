// The tool_call reward (tool_call_match.h, rewards.h): hand-written completions in Hermes and Llama 3 JSON
// syntax against expected calls; every check counted (name, each expected argument, extra calls), JSON
// value equality, malformed calls, the expected cell's accepted forms and its errors.
#include "lathe/rollout/tool_call_match.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/error.h"
#include "lathe/rollout/rewards.h"

namespace lathe::rollout {
namespace {

using Json = nlohmann::ordered_json;
using serve::ToolCallFormat;

const Json kPizza = Json::parse(R"({"name": "log_food", "arguments": {"item": "pizza", "quantity": 2, "meal": "lunch"}})");

ToolCallMatch match(const std::string& completion, const Json& want, ToolCallFormat f = ToolCallFormat::kHermes) {
  return match_tool_calls(parse_tool_calls(completion, f), expected_tool_calls(want, "row"));
}

TEST(ToolCallMatch, ExactCallPassesEveryCheck) {
  const ToolCallMatch m = match(
      "Logging it.\n<tool_call>\n{\"name\": \"log_food\", \"arguments\": {\"meal\": \"lunch\", \"item\": \"pizza\", "
      "\"quantity\": 2.0}}\n</tool_call>",
      kPizza);
  EXPECT_EQ(m.checks, 4);  // name + 3 arguments
  EXPECT_EQ(m.passed, 4);  // key order free; 2.0 == 2
  EXPECT_TRUE(m.exact());
}

TEST(ToolCallMatch, EachWrongPartIsOneFailedCheck) {
  const std::string wrong_qty =
      R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": "2", "meal": "lunch"}}</tool_call>)";
  ToolCallMatch m = match(wrong_qty, kPizza);  // "2" is a string, not the number 2
  EXPECT_EQ(m.passed, 3);
  EXPECT_FALSE(m.exact());
  EXPECT_DOUBLE_EQ(m.fraction(), 0.75);

  m = match(R"(<tool_call>{"name": "log_meal", "arguments": {"item": "pizza", "meal": "dinner"}}</tool_call>)", kPizza);
  EXPECT_EQ(m.checks, 4);
  EXPECT_EQ(m.passed, 1);  // only the item: wrong name, quantity missing, wrong meal

  // Extra arguments are not checked; an extra call is one failed check.
  m = match(R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": 2, "meal": "lunch", "note": "x"}}</tool_call>)",
            kPizza);
  EXPECT_TRUE(m.exact());
  m = match(R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": 2, "meal": "lunch"}}</tool_call>
<tool_call>{"name": "log_food", "arguments": {}}</tool_call>)",
            kPizza);
  EXPECT_EQ(m.checks, 5);
  EXPECT_EQ(m.passed, 4);
}

TEST(ToolCallMatch, NoOrMalformedCallPassesNothing) {
  for (const std::string& text : {std::string("I logged two slices of pizza."),
                                 std::string(R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza",}</tool_call>)"),
                                 std::string(R"(<tool_call>{"arguments": {"item": "pizza"}}</tool_call>)"),
                                 std::string(R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza")")}) {
    const ToolCallMatch m = match(text, kPizza);
    EXPECT_EQ(m.checks, 4) << text;
    EXPECT_EQ(m.passed, 0) << text;
  }
  // No call expected: exact when the completion makes none.
  EXPECT_TRUE(match("Nothing to log.", Json::array()).exact());
  EXPECT_FALSE(match(R"(<tool_call>{"name": "log_food", "arguments": {}}</tool_call>)", Json::array()).exact());
}

TEST(ToolCallMatch, CallsAreReadInTheModelsSyntax) {
  const std::string llama = R"({"name": "log_food", "parameters": {"item": "pizza", "quantity": 2, "meal": "lunch"}})";
  EXPECT_TRUE(match(llama, kPizza, ToolCallFormat::kLlama3Json).exact());
  EXPECT_EQ(match(llama, kPizza, ToolCallFormat::kHermes).passed, 0);  // not Hermes syntax: content
}

TEST(ToolCallMatch, ExpectedCellForms) {
  const std::string call = R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": 2, "meal": "lunch"}}</tool_call>)";
  EXPECT_TRUE(match(call, Json(kPizza.dump())).exact());  // a JSON string
  EXPECT_TRUE(match(call, Json::array({kPizza})).exact());
  const Json openai = {{"type", "function"},
                       {"function", {{"name", "log_food"}, {"arguments", kPizza["arguments"].dump()}}}};
  EXPECT_TRUE(match(call, openai).exact());  // OpenAI's message form, arguments as a string
  for (const Json& bad : {Json(3), Json("not json"), Json::parse(R"({"arguments": {}})"),
                          Json::parse(R"({"name": "f", "arguments": [1]})"), Json::parse(R"([{"name": ""}])")}) {
    try {
      expected_tool_calls(bad, "row 7: tool_call");
      ADD_FAILURE() << "accepted " << bad.dump();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("row 7: tool_call"), std::string::npos) << e.what();
    }
  }
}

TEST(ToolCallMatch, RewardScoresExactOrPartialAndNaWithoutTheColumn) {
  const auto spec = [](const nlohmann::json& e) { return parse_reward_specs(nlohmann::json::array({e}), "r.yaml", 64)[0]; };
  const RewardSpec exact = spec({{"type", "tool_call"}});
  const RewardSpec partial = spec({{"type", "tool_call"}, {"name", "call_part"}, {"partial", true}, {"column", "call"}});
  EXPECT_EQ(exact.column, "tool_call");
  const std::string half = R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": 3}}</tool_call>)";
  Json row = {{"tool_call", kPizza}, {"call", kPizza}};
  const auto score = [&](const RewardSpec& r, const std::string& text, const Json* columns) {
    return reward_value(r, {.completion = text, .completion_tokens = 8, .max_completion_tokens = 64, .columns = columns});
  };
  EXPECT_EQ(score(exact, half, &row), 0.0);
  EXPECT_DOUBLE_EQ(score(partial, half, &row), 0.5);  // name and item of 4 checks
  const Json other = {{"answer", 3}};
  EXPECT_TRUE(std::isnan(score(exact, half, &other)));
  // The raw decode (special tokens kept) is what the parser reads when given.
  const std::string whole = R"(<tool_call>{"name": "log_food", "arguments": {"item": "pizza", "quantity": 2, "meal": "lunch"}}</tool_call>)";
  EXPECT_EQ(reward_value(exact, {.completion = "no call here", .completion_raw = whole, .columns = &row}), 1.0);
  EXPECT_EQ(reward_value(exact, {.completion = whole, .completion_raw = half, .columns = &row}), 0.0);

  const auto error_of = [](const nlohmann::json& e) -> std::string {
    try {
      parse_reward_specs(nlohmann::json::array({e}), "r.yaml", 64);
    } catch (const InvalidArgument& err) {
      return err.what();
    }
    return "";
  };
  EXPECT_NE(error_of({{"type", "tool_call"}, {"parser", "xml"}}).find(".parser"), std::string::npos);
  EXPECT_NE(error_of({{"type", "tool_call"}, {"parser", "none"}}).find(".parser"), std::string::npos);
  EXPECT_NE(error_of({{"type", "tool_call"}, {"partial", 1}}).find(".partial"), std::string::npos);
  EXPECT_NE(error_of({{"type", "tool_call"}, {"pattern", "x"}}).find("unknown key pattern"), std::string::npos);
  EXPECT_EQ(spec({{"type", "tool_call"}, {"parser", "llama3_json"}}).tool_call_format, ToolCallFormat::kLlama3Json);
  EXPECT_EQ(spec({{"type", "tool_call"}, {"parser", "qwen"}}).tool_call_format, ToolCallFormat::kHermes);
  // The same check for `lathe eval --parser`, naming its flag.
  EXPECT_EQ(tool_call_format_to_match("gemma4", "--parser"), ToolCallFormat::kGemma4);
  EXPECT_THROW(
      {
        try {
          tool_call_format_to_match("none", "--parser");
        } catch (const InvalidArgument& e) {
          EXPECT_EQ(std::string(e.what()).rfind("--parser = none", 0), 0u) << e.what();
          throw;
        }
      },
      InvalidArgument);
}

}  // namespace
}  // namespace lathe::rollout
