// lathe grpo end to end through the binary, on the shipped example (recipes/grpo/tiny.yaml: the fixture Llama
// with a LoRA adapter, eight prompts, built-in format and numeric-answer rewards, the byte-level ChatML
// tokenizer): every step logs the rewards per function and the §5.7 metrics, samples with the weights of the
// step before (policy version lag 0), the sampler's and the trainer's log-probs agree, and the run ends with a
// PEFT adapter; a recipe without rewards is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

using testing::step_metric;
using testing::tokenizer_in;

std::string grpo_args(const std::string& dir, int steps) {
  return "grpo recipes/grpo/tiny.yaml grpo.tokenizer=" + dir + "/tokenizer run.dir=" + dir +
         "/run run.threads=2 schedule.steps=" + std::to_string(steps);
}

TEST(GrpoCli, TrainsWithInProcessRolloutsAndWritesAnAdapter) {
  const std::string dir = tokenizer_in(testing::scratch_dir("grpo_cli"));
  const auto [rc, out] = testing::run_lathe(grpo_args(dir, 4));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(" reward "), std::string::npos) << out;
  const std::string run = dir + "/run";
  for (const char* k : {"rewards/has_number", "rewards/calories", "rewards/mean", "frac_reward_zero_std",
                        "completions/mean_length", "entropy", "pg_clipfrac", "advantage/abs_mean", "time/rollout_s",
                        "step_s"})
    EXPECT_EQ(step_metric(run, k).size(), 4u) << k;
  for (double t : step_metric(run, "time/rollout_s")) EXPECT_GT(t, 0);
  for (double t : step_metric(run, "time/reference_s")) EXPECT_EQ(t, 0);  // beta 0: no reference forward
  for (double d : step_metric(run, "dynamic_sampling/dropped_groups")) EXPECT_TRUE(std::isnan(d));  // off: null
  for (double lag : step_metric(run, "policy_version/lag")) EXPECT_EQ(lag, 0);
  for (double d : step_metric(run, "sampler_trainer/logp_diff_max")) EXPECT_LT(d, 1e-3);
  EXPECT_TRUE(std::filesystem::exists(run + "/adapter/adapter_model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(run + "/adapter/tokenizer.json"));  // grpo.tokenizer, carried along
}

// A run resumed from a checkpoint at a generation-batch boundary (every step, on-policy) resamples the same
// completions (seeds by prompt number, the same weights) and logs the uninterrupted run's values exactly.
TEST(GrpoCli, ResumesExactlyFromACheckpoint) {
  const std::string dir = tokenizer_in(testing::scratch_dir("grpo_cli_resume"));
  const std::string common = " checkpoint.every=2 checkpoint.keep=5";
  auto [rc, out] = testing::run_lathe(grpo_args(dir, 6) + common);
  ASSERT_EQ(rc, 0) << out;
  const std::string full = dir + "/full";
  std::filesystem::rename(dir + "/run", full);
  std::tie(rc, out) = testing::run_lathe(grpo_args(dir, 6) + common);
  ASSERT_EQ(rc, 0) << out;
  for (const char* step : {"step_00000004", "step_00000006"})
    std::filesystem::remove_all(dir + "/run/checkpoints/" + step);
  std::tie(rc, out) = testing::run_lathe(grpo_args(dir, 6) + common + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("at step 2"), std::string::npos) << out;
  for (const char* k : {"loss", "rewards/mean", "completions/mean_length", "entropy"}) {
    const std::vector<double> a = step_metric(full, k), b = step_metric(dir + "/run", k);
    EXPECT_EQ(a.size(), 6u) << k;
    EXPECT_EQ(a, b) << k;
  }
}

// SIGKILL mid-run, then --resume: the resumed run logs the uninterrupted run's losses, rewards, completion
// lengths, dynamic-sampling counts and policy versions step for step (weights, weight version, data cursor and
// the sampler's seeds, which derive from the prompt numbers, all restored), with DAPO dynamic sampling on.
TEST(GrpoCli, SigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("grpo_cli_kill"));
  const int steps = 40;  // a step is a fraction of a second: the kill lands mid-run
  const auto args = [&](const std::string& run) {
    return "grpo recipes/grpo/tiny.yaml grpo.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
           " run.threads=2 schedule.steps=" + std::to_string(steps) +
           " checkpoint.every=5 checkpoint.keep=2 grpo.dynamic_sampling=true grpo.max_resample_rounds=2";
  };
  auto [rc, out] = testing::run_lathe(args("full"));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));

  const pid_t pid = testing::spawn_lathe_logged(args("killed"), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000010/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  const size_t before = testing::loss_lines(dir + "/killed").size();
  EXPECT_LT(before, static_cast<size_t>(steps));
  std::tie(rc, out) = testing::run_lathe(args("killed") + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want) << "killed at step ~" << before;
  for (const char* k : {"rewards/mean", "rewards/has_number", "completions/mean_length", "policy_version/min",
                        "dynamic_sampling/dropped_groups", "dynamic_sampling/refill_rounds"}) {
    const std::vector<double> a = step_metric(dir + "/full", k), b = step_metric(dir + "/killed", k);
    EXPECT_EQ(a.size(), static_cast<size_t>(steps)) << k;
    EXPECT_EQ(a, b) << k;
  }
  const std::vector<double> versions = step_metric(dir + "/killed", "policy_version/min");
  for (size_t i = 0; i < versions.size(); ++i) EXPECT_EQ(versions[i], static_cast<double>(i)) << "step " << i + 1;
}

TEST(GrpoCli, RefusesARecipeWithoutRewards) {
  const std::string dir = tokenizer_in(testing::scratch_dir("grpo_cli_bad"));
  const auto [rc, out] = testing::run_lathe(grpo_args(dir, 1) + " grpo.rewards=null");
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("grpo.rewards is required"), std::string::npos) << out;
}

}  // namespace
}  // namespace lathe
