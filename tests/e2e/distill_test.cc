// lathe distill end to end through the binary, on the shipped example (recipes/distill/tiny.yaml: the fixture
// Llama as the student, the wider fixture teacher, twelve conversations, the byte-level ChatML tokenizer):
// the loss falls, the KL per token is logged, the run ends with a Hugging Face folder (or a PEFT adapter with
// a lora: section), a SIGKILLed run resumes to exactly the uninterrupted losses, and a teacher with another
// vocabulary is refused before training.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

using testing::tokenizer_in;

namespace fs = std::filesystem;

std::string distill_args(const std::string& dir, const std::string& run, int steps) {
  return "distill recipes/distill/tiny.yaml sft.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
         " run.threads=2 schedule.steps=" + std::to_string(steps) + " checkpoint.every=10";
}

TEST(DistillCli, LossFallsAndWritesAHuggingFaceFolder) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli"));
  for (const char* loss : {"forward_kl", "jsd"}) {
    const std::string run = std::string("run_") + loss;
    // alpha 1: the divergence alone (the recipe's 0.5 mixes in the data's NLL, which falls anyway).
    const auto [rc, out] = testing::run_lathe(distill_args(dir, run, 30) + " distill.alpha=1 distill.loss=" + loss);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("teacher: tests/fixtures/posttrain/teacher"), std::string::npos) << out;
    EXPECT_NE(out.find("kl/tok"), std::string::npos) << out;
    const std::vector<double> l = testing::loss_values(dir + "/" + run);
    ASSERT_EQ(l.size(), 30u);
    EXPECT_LT(testing::mean_of(l, l.size() - 5, 5), 0.6 * testing::mean_of(l, 0, 5)) << loss << ": the last 5 steps against the first 5";
    const fs::path model = fs::path(dir) / run / "model";
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
      EXPECT_TRUE(fs::exists(model / f)) << f;
    EXPECT_FALSE(fs::exists(model / "optimizer.safetensors"));
    std::ifstream metrics(dir + "/" + run + "/metrics.jsonl");
    const std::string lines((std::istreambuf_iterator<char>(metrics)), std::istreambuf_iterator<char>());
    EXPECT_NE(lines.find("\"kl_per_token\":"), std::string::npos);
    EXPECT_NE(lines.find("\"divergence\":"), std::string::npos);
    std::ifstream recipe(dir + "/" + run + "/recipe.json");
    const std::string text((std::istreambuf_iterator<char>(recipe)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"temperature_squared\""), std::string::npos);
  }
}

TEST(DistillCli, LoraWritesAPeftAdapter) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_lora"));
  const std::string lora = " lora.r=8 lora.lora_alpha=16 lora.target_modules=all-linear optimizer.lr=5e-3";
  const auto [rc, out] = testing::run_lathe(distill_args(dir, "run", 20) + lora);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<double> l = testing::loss_values(dir + "/run");
  ASSERT_EQ(l.size(), 20u);
  EXPECT_LT(testing::mean_of(l, l.size() - 5, 5), testing::mean_of(l, 0, 5));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "run" / "adapter" / "adapter_config.json"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "run" / "adapter" / "adapter_model.safetensors"));
}

TEST(DistillCli, SigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_resume"));
  const int steps = 100;
  auto [rc, out] = testing::run_lathe(distill_args(dir, "full", steps));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));
  const pid_t pid = testing::spawn_lathe_logged(distill_args(dir, "killed", steps), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  EXPECT_LT(testing::loss_lines(dir + "/killed").size(), static_cast<size_t>(steps));
  std::tie(rc, out) = testing::run_lathe(distill_args(dir, "killed", steps) + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want);
}

// Data parallel: two ranks (2 of the 4 rows of each micro-batch each, a teacher per rank) follow one process
// on the same global batch. Skipped without mpirun.
TEST(DistillCli, TwoRanksEqualOneProcessOnTheSameGlobalBatch) {
  if (testing::run_shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_mpi"));
  auto [rc, out] = testing::run_lathe(distill_args(dir, "one", 8) + " run.threads=1");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_shell(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe " + testing::lathe_bin() +
      " " + distill_args(dir, "two", 8) + " run.threads=1");
  ASSERT_EQ(rc, 0) << out;
  const auto a = testing::loss_values(dir + "/one"), b = testing::loss_values(dir + "/two");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u) << out;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 1e-5 * std::abs(a[i])) << "step " << i + 1;
}

TEST(DistillCli, BadTeachersAndKeysStopBeforeTraining) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_bad"));
  // A teacher with another vocabulary: the fixture teacher's config with more ids.
  fs::create_directories(dir + "/wide");
  std::ifstream in(testing::fixtures_root() + "/posttrain/teacher/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  cfg["vocab_size"] = cfg["vocab_size"].get<int64_t>() + 64;
  Model::create(cfg.dump(), 1)->save(dir + "/wide");
  auto r = testing::run_lathe_bounded(distill_args(dir, "v", 5) + " distill.teacher=" + dir + "/wide");
  EXPECT_TRUE(testing::is_clean_error(r, "same vocabulary")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/v/checkpoints"));
  r = testing::run_lathe_bounded(distill_args(dir, "k", 5) + " distill.temprature=1");
  EXPECT_TRUE(testing::is_clean_error(r, "distill.temprature")) << r.second;
  r = testing::run_lathe_bounded(distill_args(dir, "b", 5) + " distill.loss=jsd distill.beta=1.5");
  EXPECT_TRUE(testing::is_clean_error(r, "distill.beta")) << r.second;
  r = testing::run_lathe_bounded("sft recipes/distill/tiny.yaml run.dir=" + dir + "/s");  // not sft's
  EXPECT_TRUE(testing::is_clean_error(r, "lathe distill")) << r.second;
}

}  // namespace
}  // namespace lathe
