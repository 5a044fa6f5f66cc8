// The environments of multi-turn episodes: the built-in calculator and echo, the grpo.environment keys, and an
// external JSON Lines command that answers, crashes, hangs, answers garbage or cannot start: every failure is an
// EnvironmentError naming the command, raised within the call's timeout; environment calls on worker threads
// overlap.
#include "lathe/rollout/environment.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "lathe/rollout/environment_calls.h"
#include "lathe/rollout/json_lines_process.h"

namespace lathe::rollout {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string formatted(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

TEST(Calculator, EvaluatesArithmeticAndExplainsMistakes) {
  EXPECT_EQ(calculate("2 * (3 + 4.5) / 3"), formatted(2 * (3 + 4.5) / 3));
  EXPECT_EQ(calculate("-1.5 - -2 * 3"), formatted(-1.5 - -2 * 3));
  EXPECT_EQ(calculate("10 / 4 - 3 * 2 + 1"), formatted(10.0 / 4 - 3 * 2 + 1));
  EXPECT_EQ(calculate("7 / (2 - 2)"), "error: division by zero");
  EXPECT_EQ(calculate("(1 + 2"), "error: missing ')'");
  EXPECT_EQ(calculate("1 + x").rfind("error: unexpected 'x'", 0), 0u);
  EXPECT_EQ(calculate("").rfind("error: ", 0), 0u);
}

TEST(BuiltinEnvironment, CalculatorAnswersCallsAndEchoRepeatsArguments) {
  const std::unique_ptr<Environment> calc = make_environment(parse_environment_spec(
      json{{"type", "builtin"}, {"builtin", "calculator"}}, "test.yaml"));
  ToolRequest c{.episode = "p0.g0", .turn = 1, .text = "..."};
  c.call = {{"name", "calculator"}, {"arguments", {{"expression", "6 * 7"}}}};
  EXPECT_EQ(calc->call(c, 0).content, formatted(6 * 7));
  EXPECT_FALSE(calc->call(c, 0).done);
  c.call = nullptr;  // the model wrote no JSON call: the answer says how to call
  EXPECT_EQ(calc->call(c, 0).content.rfind("error: call the calculator as", 0), 0u);
  const std::unique_ptr<Environment> echo =
      make_environment(parse_environment_spec(json{{"type", "builtin"}, {"builtin", "echo"}}, "test.yaml"));
  c.call = {{"name", "anything"}, {"arguments", {{"x", 1}}}};
  EXPECT_EQ(echo->call(c, 0).content, json({{"x", 1}}).dump());
  c.call = nullptr;
  EXPECT_EQ(echo->call(c, 0).content, c.text);
}

TEST(EnvironmentSpec, ChecksEveryKey) {
  const EnvironmentSpec s = parse_environment_spec(
      json{{"type", "command"}, {"command", {"python3", "env.py"}}, {"timeout_s", 2.5}, {"max_turns", 3}}, "r.yaml");
  EXPECT_EQ(s.kind, EnvironmentKind::kCommand);
  EXPECT_EQ(s.command, (std::vector<std::string>{"python3", "env.py"}));
  EXPECT_EQ(s.timeout.count(), 2500);
  EXPECT_EQ(s.max_turns, 3);
  EXPECT_EQ(parse_environment_spec(environment_spec_json(s), "r.yaml").command, s.command);  // round trip
  const auto message = [](const json& j) {
    try {
      parse_environment_spec(j, "r.yaml");
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(json{{"type", "shell"}}).find("r.yaml: grpo.environment.type = \"shell\""), std::string::npos);
  EXPECT_NE(message(json{{"type", "builtin"}, {"builtin", "web"}}).find("grpo.environment.builtin"), std::string::npos);
  EXPECT_NE(message(json{{"type", "command"}, {"command", "env.py"}}).find("grpo.environment.command"),
            std::string::npos);
  EXPECT_NE(message(json{{"type", "command"}, {"command", {"a"}}, {"timeout_s", 0}}).find("timeout_s"),
            std::string::npos);
  EXPECT_NE(message(json{{"type", "builtin"}, {"builtin", "echo"}, {"max_turn", 2}}).find("unknown key grpo.environment.max_turn"),
            std::string::npos);
}

// A command environment over `sh -c script`, timeout in seconds.
std::unique_ptr<Environment> shell_environment(const std::string& script, double timeout_s) {
  return make_environment(parse_environment_spec(
      json{{"type", "command"}, {"command", {"sh", "-c", script}}, {"timeout_s", timeout_s}, {"workers", 2}}, "r.yaml"));
}

// The error of one call (none: "no error") and how long the call took.
std::pair<std::string, double> failing_call(Environment& env) {
  const auto t0 = Clock::now();
  try {
    env.call(ToolRequest{.episode = "p0.g0", .turn = 1, .text = "hi"}, 0);
  } catch (const EnvironmentError& e) {
    return {e.what(), seconds_since(t0)};
  }
  return {"no error", seconds_since(t0)};
}

TEST(CommandEnvironment, AnswersOverJsonLinesFromOneLongLivedProcess) {
  // The reply carries the process id and a counter: one process answers every call of a worker.
  const std::unique_ptr<Environment> env = shell_environment(
      R"(n=0; while read -r line; do n=$((n+1)); echo "{\"content\": \"$$ $n\", \"done\": $([ $n -ge 3 ] && echo true || echo false)}"; done)",
      5);
  const ToolResult a = env->call(ToolRequest{.episode = "p0.g0", .turn = 1}, 0);
  const ToolResult b = env->call(ToolRequest{.episode = "p0.g0", .turn = 2}, 0);
  const ToolResult c = env->call(ToolRequest{.episode = "p0.g0", .turn = 3}, 0);
  const std::string pid = a.content.substr(0, a.content.find(' '));
  EXPECT_EQ(a.content, pid + " 1");
  EXPECT_EQ(b.content, pid + " 2");
  EXPECT_EQ(c.content, pid + " 3");
  EXPECT_FALSE(a.done);
  EXPECT_TRUE(c.done);
  EXPECT_NE(env->call(ToolRequest{}, 1).content.substr(0, pid.size() + 1), pid + " ");  // worker 1: its own process
}

TEST(CommandEnvironment, ReceivesTheRequestLine) {
  // The command answers with the request it read, as a string: every field arrives.
  const std::unique_ptr<Environment> env = shell_environment(
      R"sh(while read -r line; do printf '{"content": "%s"}\n' "$(printf '%s' "$line" | sed 's/\\/\\\\/g; s/"/\\"/g')"; done)sh", 5);
  ToolRequest c{.episode = "p3.g1", .prompt_index = 3, .turn = 2, .text = "call <tool_call>"};
  c.call = {{"name", "calculator"}, {"arguments", {{"expression", "1+1"}}}};
  const json got = json::parse(env->call(c, 0).content);
  EXPECT_EQ(got, (json{{"episode", "p3.g1"}, {"prompt_index", 3}, {"turn", 2}, {"text", c.text}, {"tool_call", c.call}}));
}

TEST(CommandEnvironment, CrashHangGarbageAndMissingProgramAreClearErrorsWithinTheTimeout) {
  const std::string name = "grpo.environment command `sh -c ";
  {  // exits while answering
    const std::unique_ptr<Environment> env = shell_environment("read -r line; echo oops >&2; exit 3", 5);
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find("exited with status 3 before answering"), std::string::npos) << what;
    EXPECT_LT(s, 4.0);
  }
  {  // killed by a signal
    const std::unique_ptr<Environment> env = shell_environment("read -r line; kill -KILL $$", 5);
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find("was killed by signal 9"), std::string::npos) << what;
  }
  {  // hangs: killed at the timeout, with whatever it started
    const std::unique_ptr<Environment> env = shell_environment("read -r line; sleep 60", 0.5);
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find(name), std::string::npos) << what;
    EXPECT_NE(what.find("did not answer within 0.5 s (it was killed)"), std::string::npos) << what;
    EXPECT_GE(s, 0.5);
    EXPECT_LT(s, 3.0);
  }
  {  // a line that is not JSON
    const std::unique_ptr<Environment> env = shell_environment("while read -r line; do echo 'result: 42'; done", 5);
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find("answered with a line that is not a JSON object: result: 42"), std::string::npos) << what;
  }
  {  // JSON without content
    const std::unique_ptr<Environment> env = shell_environment(R"(while read -r line; do echo '{"answer": 42}'; done)", 5);
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find(R"(answered {"answer":42}: expected {"content")"), std::string::npos) << what;
  }
  {  // no such program
    const std::unique_ptr<Environment> env = make_environment(parse_environment_spec(
        json{{"type", "command"}, {"command", {"/nonexistent/lathe-env"}}}, "r.yaml"));
    const auto [what, s] = failing_call(*env);
    EXPECT_NE(what.find("grpo.environment command `/nonexistent/lathe-env` could not be started"), std::string::npos)
        << what;
  }
}

TEST(EnvironmentCalls, SlowCallsOverlapOnWorkers) {
  const std::unique_ptr<Environment> env = make_environment(parse_environment_spec(
      json{{"type", "builtin"}, {"builtin", "echo"}, {"delay_ms", 200}}, "r.yaml"));
  EnvironmentCalls calls(*env, 8);
  const auto t0 = Clock::now();
  for (uint64_t k = 0; k < 8; ++k) calls.submit(k, ToolRequest{.text = std::to_string(k)});
  std::vector<EnvironmentAnswer> got;
  while (got.size() < 8)
    for (EnvironmentAnswer& a : calls.take(std::chrono::milliseconds(5000))) got.push_back(std::move(a));
  const double s = seconds_since(t0);
  for (const EnvironmentAnswer& a : got) EXPECT_EQ(a.result.content, std::to_string(a.key));
  EXPECT_GE(s, 0.2);
  EXPECT_LT(s, 8 * 0.2 / 2);  // one after another would take 1.6 s
}

}  // namespace
}  // namespace lathe::rollout
