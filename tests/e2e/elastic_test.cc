// `lathe launch`, the elastic supervisor over mpirun: a rank SIGKILLed mid-run -> the job resumes on 1 rank
// (the hostfile now offers one slot) with the global batch kept, then grows back to 2 when the slot
// returns; the final model equals an uninterrupted 2-rank run within float tolerance and metrics.jsonl has
// every step once. A SIGSTOPped rank is caught by the collective timeout; --max-restarts and a failure that
// repeats at the same step stop the supervisor. GRPO shrinks in whole groups per rank and resamples the
// same completions. Skipped when mpirun is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/step_beacon.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

// Enough steps (about 12 ms each here) that the job is still training on 1 rank when the slot returns.
constexpr int kSteps = 300;

// A tiny model (hidden 64, 2 layers, T 128): 4 sequences per step, 2 per rank on 2 ranks; a checkpoint
// every 10 steps.
std::string overrides(const std::string& data, const std::string& run_dir, int steps) {
  return " data.train=" + data + "/world data.val=" + data + "/world run.dir=" + run_dir +
         " run.threads=1 model.config.hidden_size=64 model.config.intermediate_size=128"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.head_dim=16 data.seq_len=128 data.batch_size=4 schedule.warmup_steps=5 eval.every=0"
         " eval.batches=2 eval.target_val_loss=0 checkpoint.every=10 checkpoint.keep=3 --no-samples schedule.steps=" +
         std::to_string(steps);
}

// The steps of metrics.jsonl's training lines, in file order.
std::vector<int64_t> metric_steps(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<int64_t> out;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j["step"].get<int64_t>());
  }
  return out;
}

std::vector<nlohmann::json> restarts(const std::string& run_dir) {
  std::ifstream in(run_dir + "/elastic/restarts.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<train::BeaconLine> beacon(const std::string& run_dir) {
  std::ifstream in(run_dir + "/elastic/steps");
  std::vector<train::BeaconLine> out;
  for (std::string line; std::getline(in, line);) {
    train::BeaconLine b;
    if (train::parse_beacon_line(line, b)) out.push_back(b);
  }
  return out;
}

void write_hostfile(const std::string& path, int slots) {
  std::ofstream(path + ".tmp") << "localhost slots=" << slots << "\n";
  fs::rename(path + ".tmp", path);  // the supervisor never reads half a file
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// --oversubscribe: 2 ranks on CI machines with fewer cores (as kMpirun).
std::string launch_args(const std::string& nproc, const std::string& extra) {
  return "launch --nproc " + nproc + " --mpirun-arg=--oversubscribe " + extra + " -- pretrain recipes/quickstart.yaml";
}

class Elastic : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::run_shell("command -v mpirun").first != 0) return;
    // The supervisor's mpirun inherits these (OpenMPI refuses root unless told; as kMpirun says).
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // the ASan build: libmpi keeps allocations until exit
    dir_ = new std::string(testing::scratch_dir("elastic"));
    ASSERT_EQ(testing::prepare_world_data(*dir_, 600).first, 0);
    // The uninterrupted reference: 2 ranks, the recipe's batch, kSteps steps.
    const auto [rc, out] = testing::run_lathe_two_ranks("pretrain recipes/quickstart.yaml" +
                                                        overrides(*dir_ + "/data", *dir_ + "/reference", kSteps));
    ASSERT_EQ(rc, 0) << out;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!dir_) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  }
  static std::string data() { return *dir_ + "/data"; }
  static std::string reference() { return *dir_ + "/reference"; }
  static std::string* dir_;
};
std::string* Elastic::dir_ = nullptr;

// Every step once, in order, 1..steps.
void expect_every_step_once(const std::string& run, int steps = kSteps) {
  std::vector<int64_t> want(steps);
  for (int i = 0; i < steps; ++i) want[i] = i + 1;
  EXPECT_EQ(metric_steps(run), want);
}

// How far two runs' tensors of one name drifted apart: the largest element difference, and the largest
// magnitude of a (the scale it is judged against).
struct Drift {
  float diff = 0, scale = 0;
};
Drift drift(const Tensor& a, const Tensor& b) {
  Drift d;
  for (int64_t k = 0; k < a.numel(); ++k) {
    d.scale = std::max(d.scale, std::abs(a.data<float>()[k]));
    d.diff = std::max(d.diff, std::abs(a.data<float>()[k] - b.data<float>()[k]));
  }
  return d;
}

TEST_F(Elastic, KilledRankShrinksToOneThenGrowsBackAndMatchesTheUninterruptedRun) {
  const std::string run = *dir_ + "/killed", hosts = *dir_ + "/hosts", log = run + ".log";
  write_hostfile(hosts, 2);
  const pid_t sup = testing::spawn_lathe_logged(
      launch_args("1:2", "--hostfile " + hosts + " --max-restarts 3") + overrides(data(), run, kSteps), log);
  ASSERT_GT(sup, 0);
  ASSERT_TRUE(testing::wait_for_file(run + "/checkpoints/step_00000020/DONE", seconds(60)));
  // Rank 1's host "goes away": one slot left, then rank 1 dies.
  write_hostfile(hosts, 1);
  const pid_t rank1 = testing::find_rank_pid(run, 1);
  ASSERT_GT(rank1, 0) << "rank 1 not found";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const double killed_at = unix_now();
  // Once the 1-rank attempt trains (its restart is logged at its first step), the slot comes back.
  ASSERT_TRUE(testing::wait_for_file(run + "/elastic/restarts.jsonl", seconds(60))) << "no restart";
  write_hostfile(hosts, 2);
  const int rc = testing::wait_exit(sup, seconds(120));
  std::ifstream lf(log);
  const std::string out((std::istreambuf_iterator<char>(lf)), {});
  ASSERT_EQ(rc, 0) << out;

  // The restart log: the failure (rank 1, signal 9) -> 1 rank with accumulation; then the growth -> 2.
  const auto r = restarts(run);
  ASSERT_EQ(r.size(), 2u) << out;
  EXPECT_NE(r[0]["reason"].get<std::string>().find("rank 1"), std::string::npos) << r[0];
  EXPECT_NE(r[0]["reason"].get<std::string>().find("signal 9"), std::string::npos) << r[0];
  EXPECT_EQ(r[0]["failed_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(r[0]["ranks_before"], 2);
  EXPECT_EQ(r[0]["ranks_after"], 1);
  EXPECT_EQ(r[0]["batch_size"], 2);
  EXPECT_EQ(r[0]["grad_accum"], 2);
  EXPECT_NE(r[0]["checkpoint"].get<std::string>().find("step_000000"), std::string::npos) << r[0];
  EXPECT_EQ(r[1]["reason"], "grow");
  EXPECT_EQ(r[1]["ranks_after"], 2);
  EXPECT_EQ(r[1]["batch_size"], 4);
  EXPECT_EQ(r[1]["grad_accum"], 1);
  // The progress line names the attempt (its last line is always drawn).
  EXPECT_NE(out.find("[attempt 3, 2/2 ranks, 1 restarts]"), std::string::npos) << out;

  // Downtime: from the kill to the first step the relaunched job finished (its first beacon line after it).
  double first_new_step = -1;
  for (const auto& b : beacon(run))
    if (b.unix_time > killed_at) {
      first_new_step = b.unix_time;
      break;
    }
  ASSERT_GT(first_new_step, 0);
  const double downtime = first_new_step - killed_at;
  std::printf("downtime from SIGKILL to the first new step: %.2f s (restart log: down %.2f s, relaunch %.2f s)\n",
              downtime, r[0]["down_s"].get<double>(), r[0]["relaunch_s"].get<double>());
  EXPECT_LT(downtime, 30.0);

  expect_every_step_once(run);
  // Before the kill the job is the reference (same ranks, same order of sums): bit for bit. The first
  // step after the resume runs on the same weights, so its loss differs only in how the batch's mean is
  // summed (micro-batches, not ranks): a few ulp, 1e-6 relative. From its update on, the 1-rank steps add
  // the batch's gradient halves in another order, and the two trajectories drift apart slowly (observed:
  // 1e-6 to 8e-6 relative over the ~280 steps after the kill); 1e-4 leaves room for that and still fails
  // on a batch that is not the same (half the batch moved the loss by 2e-3 to 4e-3 from the second step on).
  const auto want = testing::loss_values(reference()), got = testing::loss_values(run);
  ASSERT_EQ(got.size(), want.size());
  const int64_t exact_until = r[0]["resumed_step"].get<int64_t>();  // steps the 2-rank attempt kept
  EXPECT_GE(exact_until, 20);
  EXPECT_LT(r[1]["resumed_step"].get<int64_t>(), kSteps) << "the job finished before it could grow";
  double worst_loss = 0;  // the largest relative difference, reported
  for (int i = 0; i < kSteps; ++i) {
    if (i < exact_until) EXPECT_EQ(got[i], want[i]) << "step " << i + 1;
    else if (i == exact_until) EXPECT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i])) << "step " << i + 1;
    else EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i])) << "step " << i + 1;
    worst_loss = std::max(worst_loss, std::abs(got[i] - want[i]) / std::abs(want[i]));
  }
  // The final weights, element by element against each tensor's largest value: the same drift (observed
  // 2e-5 to 5e-5); 5e-4 is ten times that, while another batch or order of samples moves weights by ~1e-2
  // of their scale over these steps (lr 2e-3: the updates themselves are that large).
  const auto a = SafetensorsFile::open(reference() + "/checkpoints/step_00000300/model.safetensors");
  const auto b = SafetensorsFile::open(run + "/checkpoints/step_00000300/model.safetensors");
  ASSERT_EQ(a.entries().size(), b.entries().size());
  float worst_weight = 0;
  for (const auto& e : a.entries()) {
    const Tensor ta = a.tensor(e.name), tb = b.tensor(e.name);
    ASSERT_EQ(ta.numel(), tb.numel()) << e.name;
    const Drift d = drift(ta, tb);
    EXPECT_LE(d.diff, 5e-4f * d.scale) << e.name;
    worst_weight = std::max(worst_weight, d.diff / d.scale);
  }
  std::printf("vs the uninterrupted run: losses within %.2g relative, weights within %.2g of each tensor's scale\n",
              worst_loss, worst_weight);
}

// SIGSTOP: the rank is alive to the launcher but answers nothing. Rank 0's next collective times out
// (run.collective_timeout=3), the roll call names rank 1, MPI_Abort ends the job and the supervisor
// restarts it on 2 ranks: the same reduction order throughout, so every loss equals the reference's.
TEST_F(Elastic, StoppedRankIsCaughtByTheCollectiveTimeoutAndTheRunContinuesExactly) {
  const std::string run = *dir_ + "/stopped", log = run + ".log";
  const pid_t sup = testing::spawn_lathe_logged(
      launch_args("2:2", "--max-restarts 2") + overrides(data(), run, kSteps) + " run.collective_timeout=3", log);
  ASSERT_GT(sup, 0);
  ASSERT_TRUE(testing::wait_for_file(run + "/checkpoints/step_00000010/DONE", seconds(60)));
  const pid_t rank1 = testing::find_rank_pid(run, 1);
  ASSERT_GT(rank1, 0);
  ASSERT_EQ(::kill(rank1, SIGSTOP), 0);
  const int rc = testing::wait_exit(sup, seconds(120));
  std::ifstream lf(log);
  const std::string out((std::istreambuf_iterator<char>(lf)), {});
  ::kill(rank1, SIGKILL);  // in case the job left it behind (it should not have)
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("collective timeout"), std::string::npos) << out;
  const auto r = restarts(run);
  ASSERT_EQ(r.size(), 1u) << out;
  EXPECT_NE(r[0]["reason"].get<std::string>().find("rank 1 did not answer"), std::string::npos) << r[0];
  EXPECT_EQ(r[0]["failed_ranks"], nlohmann::json::array({1}));
  EXPECT_EQ(r[0]["ranks_after"], 2);
  expect_every_step_once(run);
  EXPECT_EQ(testing::loss_values(run), testing::loss_values(reference()));
}

// A run that diverges fails at the same step however often it is restarted: the supervisor stops after
// the second time instead of using up its restarts; with --max-restarts 0 it stops after the first.
TEST_F(Elastic, RepeatedFailureAtTheSameStepAndMaxRestartsStopTheSupervisor) {
  const std::string diverge = " optimizer.lr=1e30 optimizer.grad_clip=0";
  auto [rc, out] = testing::run_lathe_bounded(
      launch_args("1:1", "--max-restarts 5") + overrides(data(), *dir_ + "/diverge", kSteps) + diverge, 120);
  EXPECT_TRUE(testing::is_clean_error({rc, out}, "failed twice during step")) << rc << out;
  EXPECT_NE(out.find("training diverged"), std::string::npos) << out;
  EXPECT_EQ(restarts(*dir_ + "/diverge").size(), 1u);

  std::tie(rc, out) = testing::run_lathe_bounded(
      launch_args("1:1", "--max-restarts 0") + overrides(data(), *dir_ + "/no_restart", kSteps) + diverge, 120);
  EXPECT_TRUE(testing::is_clean_error({rc, out}, "--max-restarts 0 reached")) << rc << out;
  EXPECT_TRUE(restarts(*dir_ + "/no_restart").empty());
}

// GRPO (recipes/grpo/tiny.yaml: 8 completions per step, groups of 4): rank 1 killed -> 1 rank, 4 x accum 2,
// the same generation batch of 2 groups. Rollouts are seeded by prompt number, so the resumed job samples
// what the uninterrupted 2-rank run sampled: the same rewards at every step, and the same adapter up to the
// order of the float sums.
TEST(ElasticGrpo, KilledRankResumesOnOneRankInWholeGroups) {
  if (testing::run_shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  // The byte-level ChatML tokenizer written here: a fresh clone has no data/quickstart (the recipe's default).
  const std::string dir = testing::tokenizer_in(testing::scratch_dir("elastic_grpo")), run = dir + "/killed",
                    hosts = dir + "/hosts";
  constexpr int kGrpoSteps = 60;
  const auto args = [&](const std::string& run_dir) {
    return " recipes/grpo/tiny.yaml grpo.tokenizer=" + dir + "/tokenizer run.dir=" + run_dir +
           " run.threads=1 checkpoint.every=10 checkpoint.keep=2 schedule.steps=" + std::to_string(kGrpoSteps);
  };
  auto [rc, out] = testing::run_lathe_two_ranks("grpo" + args(dir + "/reference"));
  ASSERT_EQ(rc, 0) << out;
  write_hostfile(hosts, 2);
  const pid_t sup = testing::spawn_lathe_logged(
      "launch --nproc 1:2 --mpirun-arg=--oversubscribe --hostfile " + hosts + " --max-restarts 2 -- grpo" + args(run),
      run + ".log");
  ASSERT_GT(sup, 0);
  ASSERT_TRUE(testing::wait_for_file(run + "/checkpoints/step_00000010/DONE", seconds(60)));
  write_hostfile(hosts, 1);
  const pid_t rank1 = testing::find_rank_pid(run, 1, "grpo");
  ASSERT_GT(rank1, 0) << "rank 1 not found";
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  rc = testing::wait_exit(sup, seconds(120));
  std::ifstream lf(run + ".log");
  out.assign(std::istreambuf_iterator<char>(lf), {});
  ASSERT_EQ(rc, 0) << out;
  const auto r = restarts(run);
  ASSERT_EQ(r.size(), 1u) << out;
  EXPECT_EQ(r[0]["ranks_after"], 1);
  EXPECT_EQ(r[0]["batch_size"], 4);
  EXPECT_EQ(r[0]["grad_accum"], 2);
  const int64_t resumed = r[0]["resumed_step"].get<int64_t>();
  EXPECT_GE(resumed, 10);
  EXPECT_LT(resumed, kGrpoSteps) << "the job finished before the kill";
  expect_every_step_once(run, kGrpoSteps);
  EXPECT_EQ(testing::step_metric(run, "rewards/mean"), testing::step_metric(dir + "/reference", "rewards/mean"));
  // The adapters, element by element against each tensor's largest value (as the pre-training test above).
  const auto a = SafetensorsFile::open(dir + "/reference/adapter/adapter_model.safetensors");
  const auto b = SafetensorsFile::open(run + "/adapter/adapter_model.safetensors");
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (const auto& e : a.entries()) {
    const Tensor ta = a.tensor(e.name).to(DType::kF32), tb = b.tensor(e.name).to(DType::kF32);
    ASSERT_EQ(ta.numel(), tb.numel()) << e.name;
    const Drift d = drift(ta, tb);
    EXPECT_LE(d.diff, 5e-4f * d.scale) << e.name;
  }
}

TEST_F(Elastic, RefusesBadNprocAndMissingCommand) {
  for (const char* bad : {"launch --nproc 2:1 -- pretrain recipes/quickstart.yaml",
                          "launch --nproc x -- pretrain recipes/quickstart.yaml", "launch --nproc 1:2 -- serve m"}) {
    const auto r = testing::run_lathe_bounded(bad, 30);
    EXPECT_TRUE(testing::is_clean_error(r, "launch")) << bad << ": " << r.second;
  }
}

}  // namespace
}  // namespace lathe
