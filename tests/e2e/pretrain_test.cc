// lathe data synth / data prepare / pretrain / plot end to end through the binary: a run killed with
// SIGKILL at an arbitrary step and resumed with --resume logs exactly the losses of an uninterrupted run.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

using testing::lathe_bin;
using testing::loss_lines;

std::pair<int, std::string> run(const std::string& args) { return testing::run_lathe(args); }
std::vector<std::string> losses(const std::string& run_dir) { return loss_lines(run_dir); }

// A tiny model on the quickstart recipe, so the test exercises the shipped recipe file.
std::string tiny_overrides(const std::string& data, const std::string& run_dir) {
  return " data.train=" + data + "/world data.val=" + data + "/world run.dir=" + run_dir +
         " run.threads=2 model.config.hidden_size=32 model.config.intermediate_size=64"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.head_dim=8 data.seq_len=32 data.batch_size=4 schedule.steps=150 schedule.warmup_steps=5"
         " eval.every=50 eval.batches=2 checkpoint.every=5 checkpoint.keep=2 --no-samples";
}

TEST(PretrainCli, SigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = testing::scratch_dir("pretrain_cli");
  auto [rc, out] = testing::prepare_world_data(dir, 600);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("documents:"), std::string::npos) << out;

  std::tie(rc, out) = run("pretrain recipes/quickstart.yaml" + tiny_overrides(dir + "/data", dir + "/full"));
  ASSERT_EQ(rc == 0 || rc == 3, true) << out;  // 3: the tiny model misses the quickstart's target, as expected
  const auto want = losses(dir + "/full");
  ASSERT_EQ(want.size(), 150u) << out;
  EXPECT_TRUE(fs::exists(dir + "/full/loss.svg"));

  // The same run, killed with SIGKILL once it has written its step-20 checkpoint (at whatever step it
  // has reached by then), then resumed.
  const pid_t pid = testing::spawn_lathe_logged(
      "pretrain recipes/quickstart.yaml" + tiny_overrides(dir + "/data", dir + "/killed"), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  const size_t logged_before_kill = losses(dir + "/killed").size();
  EXPECT_LT(logged_before_kill, 150u);

  std::tie(rc, out) = run("pretrain recipes/quickstart.yaml" + tiny_overrides(dir + "/data", dir + "/killed") + " --resume");
  ASSERT_EQ(rc == 0 || rc == 3, true) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(losses(dir + "/killed"), want) << "killed at step ~" << logged_before_kill;

  // lathe plot redraws the curve of a finished run.
  std::tie(rc, out) = run("plot " + dir + "/full --out " + dir + "/curve.svg");
  EXPECT_EQ(rc, 0) << out;
  std::ifstream svg(dir + "/curve.svg");
  std::string head;
  std::getline(svg, head);
  EXPECT_NE(head.find("<svg"), std::string::npos);
}

// Mean training loss of steps [begin, end) (1-based steps, end exclusive) from a run's metrics.
double mean_loss(const std::string& run_dir, size_t begin, size_t end) {
  const std::vector<double> loss = testing::loss_values(run_dir);
  EXPECT_GE(loss.size() + 1, end) << run_dir;
  double sum = 0;
  for (size_t i = begin - 1; i < end - 1 && i < loss.size(); ++i) sum += loss[i];
  return sum / static_cast<double>(end - begin);
}

// run.precision=bf16 on the quickstart recipe and data (tiny model, the recipe's seed): the loss falls
// like the f32 run's, and the checkpoint holds f32 masters that `lathe generate` runs.
TEST(PretrainCli, Bf16FollowsTheF32LossOnTheQuickstartData) {
  const std::string dir = testing::scratch_dir("pretrain_bf16");
  ASSERT_EQ(testing::prepare_world_data(dir, 600).first, 0);
  for (const char* p : {"f32", "bf16"}) {
    auto [rc, out] = run("pretrain recipes/quickstart.yaml" + tiny_overrides(dir + "/data", dir + "/" + p) +
                         " checkpoint.every=0 run.precision=" + p);
    ASSERT_EQ(rc == 0 || rc == 3, true) << out;  // 3: the tiny model misses the quickstart's target
  }
  const double f32_start = mean_loss(dir + "/f32", 1, 6), f32_end = mean_loss(dir + "/f32", 131, 151);
  const double bf16_start = mean_loss(dir + "/bf16", 1, 6), bf16_end = mean_loss(dir + "/bf16", 131, 151);
  EXPECT_NEAR(bf16_start, f32_start, 1e-3 * f32_start) << "the same initial weights and batches";
  EXPECT_LT(bf16_end, 0.6 * bf16_start) << "bf16 did not learn";
  // Measured: 2.4% with this seed (a loss spike at step 55 of the bf16 run that the f32 run does not
  // have; the runs are chaotic at this learning rate), < 0.1% with seeds 1, 2, 3. 5% leaves room.
  EXPECT_NEAR(bf16_end, f32_end, 0.05 * f32_end) << "mean loss of steps 131-150";
  EXPECT_NE(losses(dir + "/bf16"), losses(dir + "/f32")) << "run.precision=bf16 changed nothing";

  auto [rc, out] = run("info " + dir + "/bf16/checkpoints/step_00000150");
  EXPECT_EQ(rc, 0) << out;
  const std::string dtypes = out.substr(out.find("dtypes"), out.find('\n', out.find("dtypes")) - out.find("dtypes"));
  EXPECT_NE(dtypes.find("f32: "), std::string::npos) << "checkpoints hold the f32 masters: " << out;
  EXPECT_EQ(dtypes.find("bf16"), std::string::npos) << out;
  std::tie(rc, out) = run("generate " + dir + "/bf16/checkpoints/step_00000150 --prompt-ids 256 --max-tokens 4");
  EXPECT_EQ(rc, 0) << out;
}

// SIGKILL in the middle of a checkpoint write: the run checkpoints every step, and the test kills it at a
// moment when a temporary checkpoint folder exists (so the write really was interrupted). The previous
// complete checkpoint still generates, and --resume continues from it and clears the temporary.
TEST(PretrainCli, SigkillDuringACheckpointWriteKeepsThePreviousOne) {
  const std::string dir = testing::scratch_dir("pretrain_kill_in_write");
  ASSERT_EQ(testing::prepare_world_data(dir, 300).first, 0);
  // The quickstart's 4.8M-parameter model: ~58 MB per checkpoint (weights, m, v), so a write takes a while.
  const std::string run_dir = dir + "/run", ckpts = run_dir + "/checkpoints";
  const std::string args = "pretrain recipes/quickstart.yaml data.train=" + dir + "/data/world data.val=" + dir +
                           "/data/world run.dir=" + run_dir +
                           " run.threads=1 data.batch_size=2 data.seq_len=32 schedule.steps=12 schedule.warmup_steps=2"
                           " eval.every=0 checkpoint.every=1 checkpoint.keep=2 --no-samples";
  const auto temporary_exists = [&] {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(ckpts, ec))
      if (e.path().filename().string().rfind(".tmp.", 0) == 0) return true;
    return false;
  };
  bool interrupted_a_write = false;
  for (int attempt = 0; attempt < 5 && !interrupted_a_write; ++attempt) {
    fs::remove_all(run_dir);
    const pid_t pid = testing::spawn_lathe_logged(args, dir + "/run.log");
    ASSERT_GT(pid, 0);
    // Wait for two complete checkpoints, then for the next write to start.
    testing::wait_for_file(ckpts + "/step_00000002/DONE");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!temporary_exists() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run ended before it could be killed";
    interrupted_a_write = temporary_exists();  // still there: the writer died inside the write
  }
  if (!interrupted_a_write) GTEST_SKIP() << "no write was caught in progress in 5 attempts";

  // The newest complete checkpoint loads and generates.
  std::vector<fs::path> complete;
  for (const auto& e : fs::directory_iterator(ckpts))
    if (fs::exists(e.path() / "DONE")) complete.push_back(e.path());
  ASSERT_FALSE(complete.empty());
  std::sort(complete.begin(), complete.end());
  auto [rc, out] = run("generate " + complete.back().string() + " --prompt-ids 256 --max-tokens 4");
  EXPECT_EQ(rc, 0) << out;

  // --resume continues from it to the end and leaves no temporary behind.
  std::tie(rc, out) = run(args + " --resume");
  ASSERT_TRUE(rc == 0 || rc == 3) << out;  // 3: the short run misses the recipe's val-loss target
  EXPECT_NE(out.find("resumed from " + complete.back().string()), std::string::npos) << out;
  EXPECT_FALSE(temporary_exists());
  EXPECT_TRUE(fs::exists(ckpts + "/step_00000012/DONE"));
  EXPECT_EQ(out.find("recipe differs"), std::string::npos) << out;  // the same recipe: no warning

  // Continuing in another precision changes the trajectory: the resume says so (and goes on).
  std::tie(rc, out) = run(args + " schedule.steps=13 run.precision=bf16 --resume");
  ASSERT_TRUE(rc == 0 || rc == 3) << out;
  EXPECT_NE(out.find("recipe differs"), std::string::npos) << out;
}

// A real full disk: a 3 MB tmpfs (needs root; skipped where mounting is not allowed).
TEST(PretrainCli, FullDiskGivesAClearErrorAndKeepsEarlierCheckpoints) {
  const std::string dir = testing::scratch_dir("pretrain_full_disk");
  const std::string disk = dir + "/disk";
  const testing::ScopedTmpfs tmpfs(disk, "3m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)";
  ASSERT_EQ(testing::prepare_world_data(dir, 300).first, 0);
  // ~1.1 MB per checkpoint: the third one does not fit.
  auto [rc, out] = run("pretrain recipes/quickstart.yaml data.train=" + dir + "/data/world data.val=" + dir +
                       "/data/world run.dir=" + disk + "/run model.config.hidden_size=64 model.config.intermediate_size=128"
                       " model.config.num_hidden_layers=2 model.config.num_attention_heads=4"
                       " model.config.num_key_value_heads=2 model.config.head_dim=16 data.seq_len=32 data.batch_size=4"
                       " schedule.steps=30 schedule.warmup_steps=5 eval.every=0 checkpoint.every=10 checkpoint.keep=5"
                       " --no-samples");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("No space left on device"), std::string::npos) << out;
  EXPECT_NE(out.find("earlier checkpoints are intact"), std::string::npos) << out;
  for (const auto& e : fs::directory_iterator(disk + "/run/checkpoints"))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << "temporary left behind";
  // The newest complete checkpoint still loads and generates.
  auto [grc, gout] = run("generate " + disk + "/run/checkpoints/step_00000020 --prompt-ids 256 --max-tokens 4");
  EXPECT_EQ(grc, 0) << gout;
}

}  // namespace
}  // namespace lathe
