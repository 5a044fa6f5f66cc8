// RewardSet (reward_set.h) with external reward commands (command_reward.h), each a small POSIX shell script
// written by the test: one process answers every group over JSON Lines, sees each request's completion and the
// row's columns, and says "not applicable" with null; a command that crashes, exits, hangs or answers malformed
// JSON is an error naming the command (the hang within its timeout, not a hung test); per-entry weights.
#include "lathe/rollout/reward_set.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::rollout {
namespace {

using nlohmann::json;

// A POSIX shell script in the test's scratch folder.
std::string script(const std::string& name, const std::string& body) {
  const std::string path = testing::scratch_dir("reward_set_" + name) + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

// Answers each request with its completion_tokens, and counts the lines it has read in a file beside it: one
// process for the whole run.
std::string tokens_script() {
  return script("tokens.sh", R"(n=0
while IFS= read -r line; do
  n=$((n + 1)); echo "$n" > "$0.lines"
  printf '%s\n' "$line" | grep -o '"completion_tokens":[0-9]*' | cut -d: -f2 | paste -sd, - | sed 's/^/[/; s/$/]/'
done
)");
}

// Answers each request with the row's "bonus" column, or null without one.
std::string bonus_script() {
  return script("bonus.sh", R"(while IFS= read -r line; do
  n=$(printf '%s\n' "$line" | grep -o '"completion_tokens":' | wc -l)
  b=$(printf '%s\n' "$line" | grep -o '"bonus":[-0-9.]*' | head -n 1 | cut -d: -f2)
  [ -z "$b" ] && b=null
  out=""; i=0
  while [ "$i" -lt "$n" ]; do out="$out${out:+,}$b"; i=$((i + 1)); done
  echo "[$out]"
done
)");
}

RewardSpec command(const std::string& name, std::vector<std::string> argv, double timeout = 10) {
  json e = {{"type", "command"}, {"name", name}, {"command", argv}, {"timeout", timeout}};
  return parse_reward_specs(json::array({e}), "r.yaml", 100)[0];
}

std::vector<RewardInput> group(const nlohmann::ordered_json& row, std::vector<int64_t> tokens) {
  std::vector<RewardInput> g;
  for (int64_t t : tokens)
    g.push_back({.prompt = "p", .completion = "c \"quoted\"\n", .completion_tokens = t, .max_completion_tokens = 100,
                 .columns = &row});
  return g;
}

TEST(RewardSet, CommandsScoreGroupsOverJsonLines) {
  const std::string tokens = tokens_script();
  std::vector<RewardSpec> specs = {command("tokens", {tokens}), command("bonus", {bonus_script()}),
                                   parse_reward_specs(json::parse(R"([{"type": "length"}])"), "r.yaml", 100)[0]};
  RewardSet set(specs);
  EXPECT_EQ(set.names(), (std::vector<std::string>{"tokens", "bonus", "length"}));
  const nlohmann::ordered_json with = {{"bonus", 2.5}, {"answer", "x"}}, without = {{"answer", "x"}};
  for (int round = 0; round < 3; ++round) {
    const std::vector<std::vector<double>> a = set.score(group(with, {3, 50, 7}));
    ASSERT_EQ(a.size(), 3u);
    EXPECT_EQ(a[0], (std::vector<double>{3, 2.5, -0.03}));
    EXPECT_EQ(a[1][0], 50);
    EXPECT_EQ(a[2][0], 7);
    EXPECT_EQ(a[1][1], 2.5);
    const std::vector<std::vector<double>> b = set.score(group(without, {4, 5}));
    EXPECT_EQ(b[1][0], 5);
    EXPECT_TRUE(std::isnan(b[0][1]) && std::isnan(b[1][1]));  // null: not applicable
  }
  std::ifstream lines(tokens + ".lines");
  int n = 0;
  lines >> n;
  EXPECT_EQ(n, 6);  // one process read all six groups
}

TEST(RewardSet, WeightsComeFromTheEntries) {
  const std::vector<RewardSpec> specs = parse_reward_specs(
      json::parse(R"([{"type": "length", "weight": 0.5}, {"type": "format", "pattern": "a"}])"), "r.yaml", 100);
  EXPECT_EQ(reward_weights(specs), (std::vector<double>{0.5, 1.0}));
  EXPECT_TRUE(reward_weights({specs[1]}).empty());  // none set: every function weighs 1
}

std::string error_of(const RewardSpec& spec) {
  try {
    RewardSet set({spec});
    const nlohmann::ordered_json row = nlohmann::ordered_json::object();
    set.score(group(row, {1, 2}));
    try {
      set.score(group(row, {1, 2}));
    } catch (const Error& again) {
      return std::string("second call: ") + again.what();
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RewardSet, AFailingCommandIsAnErrorNamingIt) {
  // The first call's error names the command and what went wrong.
  std::string e = error_of(command("crash", {"sh", "-c", "read l; exit 3"}));
  EXPECT_NE(e.find("sh -c read l; exit 3"), std::string::npos) << e;
  EXPECT_NE(e.find("exited with status 3"), std::string::npos) << e;
  e = error_of(command("garbage", {"sh", "-c", "while read l; do echo 'not json'; done"}));
  EXPECT_NE(e.find("not JSON: not json"), std::string::npos) << e;
  e = error_of(command("short", {"sh", "-c", "while read l; do echo '[1]'; done"}));
  EXPECT_NE(e.find("a JSON array of 2"), std::string::npos) << e;
  e = error_of(command("text", {"sh", "-c", "while read l; do echo '[1, \"a\"]'; done"}));
  EXPECT_NE(e.find("not a finite number or null"), std::string::npos) << e;
  e = error_of(command("once", {"sh", "-c", "read l; echo '[1, 2]'"}));  // answers once, then exits
  EXPECT_NE(e.find("second call"), std::string::npos) << e;
  EXPECT_NE(e.find("exited with status 0"), std::string::npos) << e;
  e = error_of(command("missing", {"/nonexistent/reward-program"}));
  EXPECT_NE(e.find("/nonexistent/reward-program: cannot start it"), std::string::npos) << e;
  // A hang ends at the timeout, with the process killed.
  const auto t0 = std::chrono::steady_clock::now();
  e = error_of(command("hang", {"sh", "-c", "read l; exec sleep 60"}, 0.5));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("no answer within 0.5 s"), std::string::npos) << e;
  EXPECT_NE(e.find("(killed)"), std::string::npos) << e;
  EXPECT_LT(waited, 10.0);
}

}  // namespace
}  // namespace lathe::rollout
