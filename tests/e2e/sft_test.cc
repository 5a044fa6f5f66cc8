// lathe sft end to end through the binary, on the shipped example (recipes/sft/tiny.yaml: the fixture Llama,
// twelve conversations, the byte-level ChatML tokenizer): the loss falls, the run ends with a Hugging Face
// folder, a run killed with SIGKILL and resumed logs exactly the losses of an uninterrupted one, and a bad
// data row stops the run before training with its file and line.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

using testing::tokenizer_in;

namespace fs = std::filesystem;

// The recipe with a scratch tokenizer and run folder; `steps` optimizer steps, a checkpoint every 10.
std::string sft_args(const std::string& dir, const std::string& run, int steps) {
  return "sft recipes/sft/tiny.yaml sft.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
         " run.threads=2 schedule.steps=" + std::to_string(steps) + " checkpoint.every=10";
}

// The summed losses of a run's first and last 5 steps.
std::pair<double, double> first_and_last_five(const std::vector<double>& loss) {
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) {
    first += loss[static_cast<size_t>(i)];
    last += loss[loss.size() - 1 - static_cast<size_t>(i)];
  }
  return {first, last};
}

TEST(SftCli, TrainsAndWritesAHuggingFaceFolder) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli"));
  const auto [rc, out] = testing::run_lathe(sft_args(dir, "run", 40) + " data.val=recipes/sft/tiny.jsonl eval.every=20");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("sft data: 12 examples"), std::string::npos) << out;
  EXPECT_NE(out.find("val loss"), std::string::npos) << out;
  const std::vector<double> loss = testing::loss_values(dir + "/run");
  ASSERT_EQ(loss.size(), 40u);
  const auto [first, last] = first_and_last_five(loss);
  EXPECT_LT(last, 0.7 * first) << "the loss of the last 5 steps against the first 5";
  const fs::path model = fs::path(dir) / "run" / "model";
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(model / f)) << f;
  EXPECT_FALSE(fs::exists(model / "optimizer.safetensors"));
  EXPECT_FALSE(fs::exists(model / "state.json"));
  EXPECT_EQ(Model::load(model.string())->config().vocab_size, 320);
  // Each step logs its loss denominator: the trained tokens of the whole step.
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  const std::string lines((std::istreambuf_iterator<char>(metrics)), std::istreambuf_iterator<char>());
  EXPECT_NE(lines.find("\"trained_tokens\":"), std::string::npos);
  EXPECT_NE(lines.find("\"val_loss\":"), std::string::npos);
  // The resolved recipe writes every sft default.
  std::ifstream recipe(dir + "/run/recipe.json");
  const std::string text((std::istreambuf_iterator<char>(recipe)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"truncation_mode\""), std::string::npos);
}

TEST(SftCli, SigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_resume"));
  const int steps = 150;  // enough for the kill to land mid-run (a step is milliseconds)
  auto [rc, out] = testing::run_lathe(sft_args(dir, "full", steps));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));

  const pid_t pid = testing::spawn_lathe_logged(sft_args(dir, "killed", steps), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  const size_t before = testing::loss_lines(dir + "/killed").size();
  EXPECT_LT(before, static_cast<size_t>(steps));
  std::tie(rc, out) = testing::run_lathe(sft_args(dir, "killed", steps) + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want) << "killed at step ~" << before;
}

// Data parallel: two ranks (each 2 of the 4 rows of a micro-batch) follow one process on the same global
// batch, the loss normalised by the step's trained tokens over both ranks. Skipped without mpirun.
TEST(SftCli, TwoRanksEqualOneProcessOnTheSameGlobalBatch) {
  if (testing::run_shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_mpi"));
  auto [rc, out] = testing::run_lathe(sft_args(dir, "one", 12) + " run.threads=1");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_lathe_two_ranks(sft_args(dir, "two", 12) + " run.threads=1");
  ASSERT_EQ(rc, 0) << out;
  testing::expect_same_losses(dir + "/one", dir + "/two", 12, out);
}

TEST(SftCli, ABadRowStopsBeforeTrainingNamingFileAndLine) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_bad"));
  const std::string data = dir + "/bad.jsonl";
  std::ofstream(data) << "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"c\"}\n";
  auto r = testing::run_lathe_bounded(sft_args(dir, "run", 5) + " data.train=" + data);
  EXPECT_TRUE(testing::is_clean_error(r, data + ":2: ")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/run/checkpoints"));
  // An unknown sft key is refused by name.
  r = testing::run_lathe_bounded(sft_args(dir, "run2", 5) + " sft.packign=true");
  EXPECT_TRUE(testing::is_clean_error(r, "sft.packign")) << r.second;
}

// An sft: section is `lathe sft`'s; a lora: section's keys are PEFT's (an unsupported one is refused by name).
TEST(SftCli, SectionsBelongToTheirCommand) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_sections"));
  auto r = testing::run_lathe_bounded("pretrain recipes/sft/tiny.yaml run.dir=" + dir + "/p");
  EXPECT_TRUE(testing::is_clean_error(r, "lathe sft")) << r.second;
  r = testing::run_lathe_bounded(sft_args(dir, "l", 5) + " lora.r=8 lora.use_dora=true");
  EXPECT_TRUE(testing::is_clean_error(r, "use_dora")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/l/checkpoints"));
}

// LoRA (recipe lora:): rank-8 adapters on every linear, dropout on; the base stays frozen.
std::string lora_args(const std::string& dir, const std::string& run, int steps) {
  return sft_args(dir, run, steps) +
         " lora.r=8 lora.lora_alpha=16 lora.target_modules=all-linear lora.lora_dropout=0.1 optimizer.lr=5e-3";
}

// The loss falls with only the adapters training; checkpoints and the result are PEFT folders, which
// `lathe generate --adapter` runs and `lathe merge` folds into the base.
TEST(SftCli, LoraTrainsTheAdapterAndWritesAPeftFolder) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_lora"));
  auto [rc, out] = testing::run_lathe(lora_args(dir, "run", 40));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("LoRA: rank 8 on 14 modules"), std::string::npos) << out;
  const std::vector<double> loss = testing::loss_values(dir + "/run");
  ASSERT_EQ(loss.size(), 40u);
  const auto [first, last] = first_and_last_five(loss);
  EXPECT_LT(last, 0.9 * first) << "the loss of the last 5 steps against the first 5";
  const fs::path adapter = fs::path(dir) / "run" / "adapter";
  for (const char* f : {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(adapter / f)) << f;
  EXPECT_FALSE(fs::exists(adapter / "model.safetensors"));  // the frozen base is never copied
  EXPECT_FALSE(fs::exists(fs::path(dir) / "run" / "checkpoints" / "step_00000040" / "model.safetensors"));
  const std::string base = "tests/fixtures/models/llama", ids = " --prompt-ids 1,2,3 --max-tokens 8";
  std::tie(rc, out) = testing::run_lathe("generate " + base + " --adapter " + adapter.string() + ids);
  ASSERT_EQ(rc, 0) << out;
  const std::string with_adapter = out.substr(0, out.find('\n'));  // the ids (timings follow)
  std::tie(rc, out) = testing::run_lathe("merge " + base + " " + adapter.string() + " " + dir + "/merged");
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_lathe("generate " + dir + "/merged" + ids);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.substr(0, out.find('\n')), with_adapter);
}

// LoRA with dropout: a run killed with SIGKILL and resumed from its adapter checkpoint logs exactly the
// losses of an uninterrupted one (the base reloaded from model.base, the masks a function of the position).
TEST(SftCli, LoraSigkillAndResumeReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("sft_cli_lora_resume"));
  const int steps = 150;
  auto [rc, out] = testing::run_lathe(lora_args(dir, "full", steps));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));
  const pid_t pid = testing::spawn_lathe_logged(lora_args(dir, "killed", steps), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  EXPECT_LT(testing::loss_lines(dir + "/killed").size(), static_cast<size_t>(steps));
  std::tie(rc, out) = testing::run_lathe(lora_args(dir, "killed", steps) + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want);
}

}  // namespace
}  // namespace lathe
