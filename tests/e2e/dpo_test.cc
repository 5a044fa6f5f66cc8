// lathe dpo end to end through the binary, on the shipped example (recipes/dpo/tiny.yaml: the fixture Llama,
// twelve meal-logging preference pairs, the byte-level ChatML tokenizer): the reward margin and accuracy rise,
// the run ends with a Hugging Face folder (or with LoRA a PEFT adapter), cached reference log-probs give the
// losses of recomputed ones bit for bit, and a run killed with SIGKILL and resumed logs exactly the losses of
// an uninterrupted one.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

using testing::tokenizer_in;

namespace fs = std::filesystem;

std::string dpo_args(const std::string& dir, const std::string& run, int steps) {
  return "dpo recipes/dpo/tiny.yaml dpo.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
         " run.threads=2 schedule.steps=" + std::to_string(steps) + " checkpoint.every=10";
}

using testing::step_metric;

void expect_rewards_rise(const std::string& run_dir, size_t steps) {
  const std::vector<double> margin = step_metric(run_dir, "rewards/margins"),
                            acc = step_metric(run_dir, "rewards/accuracies");
  ASSERT_EQ(margin.size(), steps);
  ASSERT_EQ(acc.size(), steps);
  for (const char* k : {"rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected"})
    EXPECT_EQ(step_metric(run_dir, k).size(), steps) << k;
  EXPECT_GT(testing::mean_of(margin, steps - 5, 5), testing::mean_of(margin, 0, 5) + 0.05) << "the reward margin of the last 5 steps";
  EXPECT_GT(testing::mean_of(acc, steps - 5, 5), testing::mean_of(acc, 0, 5)) << "the reward accuracy of the last 5 steps";
  EXPECT_GE(testing::mean_of(acc, steps - 5, 5), 0.9);
  const std::vector<double> loss = testing::loss_values(run_dir);
  EXPECT_LT(testing::mean_of(loss, steps - 5, 5), testing::mean_of(loss, 0, 5));
}

TEST(DpoCli, RaisesTheRewardMarginAndWritesAHuggingFaceFolder) {
  const std::string dir = tokenizer_in(testing::scratch_dir("dpo_cli"));
  const auto [rc, out] = testing::run_lathe(dpo_args(dir, "run", 30) + " data.val=recipes/dpo/tiny.jsonl eval.every=15");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("dpo data: 12 pairs"), std::string::npos) << out;
  EXPECT_NE(out.find("computed once per example and cached in memory"), std::string::npos) << out;
  EXPECT_NE(out.find("val reward acc"), std::string::npos) << out;
  expect_rewards_rise(dir + "/run", 30);
  const fs::path model = fs::path(dir) / "run" / "model";
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) EXPECT_TRUE(fs::exists(model / f)) << f;
  std::ifstream recipe(dir + "/run/recipe.json");
  const nlohmann::json r = nlohmann::json::parse(recipe);
  EXPECT_EQ(r["dpo"]["loss_type"], "sigmoid");  // every default written
  EXPECT_TRUE(r["dpo"].contains("label_smoothing"));
}

TEST(DpoCli, CachedReferenceLogProbsEqualRecomputedOnes) {
  const std::string dir = tokenizer_in(testing::scratch_dir("dpo_cli_cache"));
  auto [rc, out] = testing::run_lathe(dpo_args(dir, "cached", 8));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_lathe(dpo_args(dir, "recomputed", 8) + " dpo.cache_ref_log_probs=false");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("recomputed every step"), std::string::npos) << out;
  const auto a = testing::loss_lines(dir + "/cached");
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(testing::loss_lines(dir + "/recomputed"), a);
  EXPECT_EQ(step_metric(dir + "/recomputed", "rewards/margins"), step_metric(dir + "/cached", "rewards/margins"));
}

// LoRA: the reference is the same model with the adapter off; the result a PEFT folder.
TEST(DpoCli, LoraUsesTheBaseAsReferenceAndWritesAnAdapter) {
  const std::string dir = tokenizer_in(testing::scratch_dir("dpo_cli_lora"));
  const auto [rc, out] = testing::run_lathe(dpo_args(dir, "run", 30) +
                                            " lora.r=8 lora.lora_alpha=16 lora.target_modules=all-linear optimizer.lr=5e-3");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("the adapter off (no second copy)"), std::string::npos) << out;
  expect_rewards_rise(dir + "/run", 30);
  for (const char* f : {"adapter_config.json", "adapter_model.safetensors"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / "run" / "adapter" / f)) << f;
}

// The other losses train too (a few steps each: the loss is finite and the margin grows).
TEST(DpoCli, EveryLossTypeRuns) {
  const std::string dir = tokenizer_in(testing::scratch_dir("dpo_cli_types"));
  for (const std::string t : {"robust dpo.label_smoothing=0.1", "hinge", "ipo", "simpo", "orpo", "sigmoid dpo.rpo_alpha=1"}) {
    const std::string run = t.substr(0, t.find(' '));
    const auto [rc, out] = testing::run_lathe(dpo_args(dir, run, 12) + " dpo.loss_type=" + t);
    ASSERT_EQ(rc, 0) << t << "\n" << out;
    const std::vector<double> margin = step_metric(dir + "/" + run, "rewards/margins");
    ASSERT_EQ(margin.size(), 12u) << t;
    EXPECT_GT(testing::mean_of(margin, 9, 3), testing::mean_of(margin, 0, 3)) << t;
  }
  const auto r = testing::run_lathe_bounded(dpo_args(dir, "bad", 2) + " dpo.loss_type=kpo");
  EXPECT_TRUE(testing::is_clean_error(r, "dpo.loss_type")) << r.second;
  const auto r2 = testing::run_lathe_bounded(dpo_args(dir, "bad2", 2) + " dpo.betta=1");
  EXPECT_TRUE(testing::is_clean_error(r2, "dpo.betta")) << r2.second;
}

TEST(DpoCli, SigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("dpo_cli_resume"));
  const int steps = 100;
  auto [rc, out] = testing::run_lathe(dpo_args(dir, "full", steps));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));

  const pid_t pid = testing::spawn_lathe_logged(dpo_args(dir, "killed", steps), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  const size_t before = testing::loss_lines(dir + "/killed").size();
  EXPECT_LT(before, static_cast<size_t>(steps));
  std::tie(rc, out) = testing::run_lathe(dpo_args(dir, "killed", steps) + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want) << "killed at step ~" << before;
}

}  // namespace
}  // namespace lathe
