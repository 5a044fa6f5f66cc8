// lathe grpo with grpo.environment through the binary, on the shipped example (recipes/grpo/tiny.yaml) with the
// byte-level ChatML tokenizer: multi-turn episodes with the built-in calculator train and export an adapter, the
// run's recipe.yaml records every environment key with its default, and a bad environment key is refused by name
// before any step. (The episodes themselves, and a failing command environment, are tested in
// src/lathe/rollout/episode_rollout_test.cc: a random tiny model rarely writes a tool call.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

std::string grpo_args(const std::string& dir, int steps) {
  return "grpo recipes/grpo/tiny.yaml grpo.tokenizer=" + dir + "/tokenizer run.dir=" + dir +
         "/run run.threads=2 schedule.steps=" + std::to_string(steps);
}

TEST(GrpoEnvironmentCli, TrainsOnEpisodesWithABuiltinCalculator) {
  const std::string dir = testing::tokenizer_in(testing::scratch_dir("grpo_env_cli"));
  // "e" as the end marker: a turn that writes one calls the calculator (with no JSON call: an answer saying how).
  const auto [rc, out] = testing::run_lathe(grpo_args(dir, 2) +
                                            " 'grpo.environment={type: builtin, builtin: calculator, tool_call_end: e}'");
  ASSERT_EQ(rc, 0) << out;
  const std::string run = dir + "/run";
  EXPECT_EQ(testing::step_metric(run, "rewards/mean").size(), 2u);
  const std::vector<double> turns = testing::step_metric(run, "episodes/turns_mean");  // logged per generation
  ASSERT_EQ(turns.size(), 2u);
  for (double t : turns) EXPECT_TRUE(t >= 1 && t <= 4) << t;  // max_turns 4
  EXPECT_TRUE(std::filesystem::exists(run + "/adapter/adapter_model.safetensors"));
  std::ifstream in(run + "/recipe.yaml");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string recipe = ss.str();
  for (const char* key : {"environment:", "builtin: \"calculator\"", "max_turns: 4", "workers: 16",
                          "tool_call_end: \"e\"", "tool_call_start: \"<tool_call>\""})
    EXPECT_NE(recipe.find(key), std::string::npos) << key << " not in\n" << recipe;
}

TEST(GrpoEnvironmentCli, RefusesABadEnvironmentByName) {
  const std::string dir = testing::tokenizer_in(testing::scratch_dir("grpo_env_cli_bad"));
  auto [rc, out] = testing::run_lathe(grpo_args(dir, 1) + " 'grpo.environment={type: shell}'");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("grpo.environment.type = \"shell\": must be builtin or command"), std::string::npos) << out;
  std::tie(rc, out) = testing::run_lathe(grpo_args(dir, 1) + " 'grpo.environment={type: command, command: python3}'");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("grpo.environment.command = \"python3\": expected the program and its arguments"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace lathe
