// End-to-end checks of the lathe binary (path from $LATHE_BIN, set by CTest): exit codes and output.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

struct CliRun {
  int exit_code;
  std::string output;  // stdout and stderr
};

CliRun run(const std::string& args) {
  auto [code, out] = testing::run_lathe(args);
  return {code, out};
}

std::string model(const std::string& name) { return testing::fixtures_root() + "/models/" + name; }

TEST(Cli, VerifyPassesOnFixture) {
  CliRun r = run("verify " + model("qwen3_moe") + " " + model("qwen3_moe") + "/reference.safetensors --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("verify: PASS"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("grad.model.layers.0.mlp.experts.0.gate_proj.weight"), std::string::npos) << r.output;
}

TEST(Cli, VerifyFailsAgainstAnotherModelsReference) {
  // Same shapes ([2, 12, 320] logits), different model: must fail, not crash.
  CliRun r = run("verify " + model("llama") + " " + model("qwen3") + "/reference.safetensors");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("FAIL"), std::string::npos) << r.output;
}

TEST(Cli, GenerateGreedyMatchesReference) {
  std::ifstream in(model("llama") + "/reference.json");
  nlohmann::json ref = nlohmann::json::parse(in);
  std::string prompt, want;
  for (const auto& v : ref["greedy_prompt"]) prompt += (prompt.empty() ? "" : ",") + std::to_string(v.get<int>());
  for (const auto& v : ref["greedy_output_ids"]) want += (want.empty() ? "" : ",") + std::to_string(v.get<int>());
  const size_t n_new = ref["greedy_output_ids"].size() - ref["greedy_prompt"].size();
  // --mmap: the same weights read in place from the checkpoint's map instead of the huge-page arena.
  for (const std::string flag : {"", " --mmap"}) {
    CliRun r = run("generate " + model("llama") + " --prompt-ids " + prompt + " --max-tokens " +
                   std::to_string(n_new) + " --ignore-eos" + flag);
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.output;
    EXPECT_EQ(r.output.substr(0, r.output.find('\n')), want) << flag << ": " << r.output;
  }
}

TEST(Cli, InfoReportsFamilyAndParameters) {
  std::ifstream in(model("gpt2") + "/reference.json");
  nlohmann::json ref = nlohmann::json::parse(in);
  CliRun r = run("info " + model("gpt2"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gpt2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(std::to_string(ref["n_params"].get<int64_t>())), std::string::npos) << r.output;
}

TEST(Cli, BadInputGivesOneClearErrorAndNonZeroExit) {
  CliRun r = run("info " + testing::fixtures_root() + "/tokenizers");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
  r = run("generate " + model("llama") + " --prompt-ids 1,x,3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("'x'"), std::string::npos) << r.output;
  r = run("generate " + model("llama") + " --prompt-ids 100000");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("100000"), std::string::npos) << r.output;
  r = run("frobnicate");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run("verify " + model("llama") + " " + model("llama") + "/config.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("config.json"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace lathe
