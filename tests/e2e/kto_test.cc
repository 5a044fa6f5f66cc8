// lathe dpo with dpo.loss_type kto end to end through the binary, on the shipped example
// (recipes/dpo/kto-tiny.yaml: the fixture Llama, 24 unpaired meal-logging examples, the byte-level ChatML
// tokenizer): the loss falls and the reward margin rises, TRL's metrics are logged, the class-balance warning
// comes when the weights are off, and bad inputs (no label, batch 1, mismatched keys) are clean errors.
#include <gtest/gtest.h>

#include <cmath>
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

std::string kto_args(const std::string& dir, const std::string& run, int steps) {
  return "dpo recipes/dpo/kto-tiny.yaml dpo.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
         " run.threads=2 schedule.steps=" + std::to_string(steps) + " checkpoint.every=10";
}

// The mean of the non-NaN values of v[from, from + n) (a step without desirable or undesirable examples
// logs no margin).
double mean_present(const std::vector<double>& v, size_t from, size_t n) {
  double s = 0, c = 0;
  for (size_t i = from; i < from + n; ++i)
    if (!std::isnan(v[i])) s += v[i], c += 1;
  return c > 0 ? s / c : NAN;
}

void expect_trains(const std::string& run_dir, size_t steps) {
  const std::vector<double> loss = testing::loss_values(run_dir);
  ASSERT_EQ(loss.size(), steps);
  EXPECT_LT(testing::mean_of(loss, steps - 5, 5), testing::mean_of(loss, 0, 5)) << "the loss of the last 5 steps";
  for (const char* k : {"rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected", "kl"})
    EXPECT_EQ(testing::step_metric(run_dir, k).size(), steps) << k;
  const std::vector<double> margin = testing::step_metric(run_dir, "rewards/margins");
  EXPECT_GT(mean_present(margin, steps - 8, 8), mean_present(margin, 0, 8)) << "the reward margin rises";
  for (double z0 : testing::step_metric(run_dir, "kl")) EXPECT_GE(z0, 0.0);  // clamped
}

TEST(KtoCli, TheLossFallsTheMarginRisesAndTheRunWritesAHuggingFaceFolder) {
  const std::string dir = tokenizer_in(testing::scratch_dir("kto_cli"));
  const auto [rc, out] = testing::run_lathe(kto_args(dir, "run", 30) + " data.val=recipes/dpo/kto-tiny.jsonl eval.every=15");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("dpo data: 24 unpaired examples (12 desirable, 12 undesirable)"), std::string::npos) << out;
  EXPECT_NE(out.find("per KL pair"), std::string::npos) << out;
  EXPECT_EQ(out.find("warning: dpo kto"), std::string::npos) << out;  // 12 / 12 with w_D = w_U: ratio 1
  EXPECT_NE(out.find("val reward margin"), std::string::npos) << out;
  expect_trains(dir + "/run", 30);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(fs::path(dir) / "run" / "model" / f)) << f;
  std::ifstream recipe(dir + "/run/recipe.json");
  const nlohmann::json r = nlohmann::json::parse(recipe);
  EXPECT_EQ(r["dpo"]["loss_type"], "kto");
  EXPECT_EQ(r["dpo"]["desirable_weight"], 1.0);
  EXPECT_EQ(r["dpo"]["undesirable_weight"], 1.0);
}

// LoRA: the reference is the base with the adapter off; cached reference log-probs (examples and KL pairs)
// give the losses of recomputed ones bit for bit.
TEST(KtoCli, LoraTrainsAndCachedReferenceEqualsRecomputed) {
  const std::string dir = tokenizer_in(testing::scratch_dir("kto_cli_lora"));
  const std::string lora = " lora.r=8 lora.lora_alpha=16 lora.target_modules=all-linear optimizer.lr=5e-3";
  auto [rc, out] = testing::run_lathe(kto_args(dir, "cached", 30) + lora);
  ASSERT_EQ(rc, 0) << out;
  expect_trains(dir + "/cached", 30);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "cached" / "adapter" / "adapter_model.safetensors"));
  std::tie(rc, out) = testing::run_lathe(kto_args(dir, "recomputed", 30) + lora + " dpo.cache_ref_log_probs=false");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/recomputed"), testing::loss_lines(dir + "/cached"));
}

// TRL's check of the class balance: w_D·n_D / (w_U·n_U) = 2 is outside [1, 4/3].
TEST(KtoCli, WarnsOnceWhenTheClassWeightsAreOutOfBalance) {
  const std::string dir = tokenizer_in(testing::scratch_dir("kto_cli_warn"));
  const auto [rc, out] = testing::run_lathe(kto_args(dir, "run", 2) + " dpo.desirable_weight=2");
  ASSERT_EQ(rc, 0) << out;
  const size_t at = out.find("warning: dpo kto");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.find("warning: dpo kto", at + 1), std::string::npos) << out;
  EXPECT_NE(out.find("dpo.desirable_weight in [1, 1.33"), std::string::npos) << out;
}

// Data parallel: reference-free, z0 is 0 whatever the KL pairs, so 2 ranks of 2 examples follow one process
// of 4 (the loss, and rewards/chosen, a per-class mean weighted over the ranks). With the reference, z0 is
// all-reduced inside the loss and the ranks run different numbers of evaluation batches (3 over 2 ranks):
// the job must finish.
TEST(KtoCli, TwoRanksFollowOneProcessAndFinishWithEvaluation) {
  if (testing::run_shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const std::string dir = tokenizer_in(testing::scratch_dir("kto_cli_mpi"));
  const std::string free = " dpo.reference_free=true run.threads=1";
  auto [rc, out] = testing::run_lathe(kto_args(dir, "one", 8) + free);
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_shell(testing::kMpirun + testing::lathe_bin() + " " + kto_args(dir, "two", 8) + free);
  ASSERT_EQ(rc, 0) << out;
  const std::vector<double> a = testing::loss_values(dir + "/one"), b = testing::loss_values(dir + "/two");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u) << out;
  std::ifstream start(dir + "/two/metrics.jsonl");
  std::string first;
  std::getline(start, first);
  EXPECT_NE(first.find("\"ranks\":2"), std::string::npos) << first;
  const std::vector<double> ca = testing::step_metric(dir + "/one", "rewards/chosen"),
                            cb = testing::step_metric(dir + "/two", "rewards/chosen");
  for (size_t i = 0; i < a.size(); ++i) {  // f32 forwards, gradients summed in another order: 1e-5 relative
    EXPECT_NEAR(b[i], a[i], 1e-5 * std::fabs(a[i])) << "step " << i + 1;
    if (std::isnan(ca[i])) EXPECT_TRUE(std::isnan(cb[i])) << "step " << i + 1;
    else EXPECT_NEAR(cb[i], ca[i], 1e-5 * std::fabs(ca[i]) + 1e-6) << "step " << i + 1;
  }
  std::tie(rc, out) = testing::run_shell(testing::kMpirun + testing::lathe_bin() + " " + kto_args(dir, "ref", 6) +
                                         " run.threads=1 data.val=recipes/dpo/kto-tiny.jsonl eval.every=3 eval.batches=3");
  ASSERT_EQ(rc, 0) << out;
  for (double z0 : testing::step_metric(dir + "/ref", "kl")) EXPECT_GE(z0, 0.0);
  EXPECT_EQ(testing::loss_values(dir + "/ref").size(), 6u);
  std::ifstream metrics(dir + "/ref/metrics.jsonl");
  int evals = 0;
  for (std::string line; std::getline(metrics, line);) evals += line.find("\"val_loss\"") != std::string::npos;
  EXPECT_EQ(evals, 2) << "steps 3 and 6";
}

TEST(KtoCli, BadInputsAreCleanErrors) {
  const std::string dir = tokenizer_in(testing::scratch_dir("kto_cli_bad"));
  const auto write = [&](const std::string& name, const std::string& rows) {
    std::ofstream(dir + "/" + name) << rows;
    return dir + "/" + name;
  };
  const std::string no_label = write("no_label.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n"
                                                       "{\"prompt\": \"c\", \"completion\": \"d\"}\n");
  auto r = testing::run_lathe_bounded(kto_args(dir, "bad1", 2) + " data.train=" + no_label);
  EXPECT_TRUE(testing::is_clean_error(r, "unpaired preference rows (prompt, completion, label")) << r.second;
  const std::string late = write("late.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\", \"label\": true}\n"
                                               "{\"prompt\": \"c\", \"completion\": \"d\"}\n");
  r = testing::run_lathe_bounded(kto_args(dir, "bad2", 2) + " data.train=" + late);
  EXPECT_TRUE(testing::is_clean_error(r, "late.jsonl:2: column 'label' missing")) << r.second;
  r = testing::run_lathe_bounded(kto_args(dir, "bad3", 2) + " data.batch_size=1");
  EXPECT_TRUE(testing::is_clean_error(r, "needs data.batch_size > 1")) << r.second;
  r = testing::run_lathe_bounded(kto_args(dir, "bad4", 2) + " data.train=recipes/dpo/tiny.jsonl");
  EXPECT_TRUE(testing::is_clean_error(r, "this file is preference")) << r.second;
  r = testing::run_lathe_bounded(kto_args(dir, "bad5", 2) + " dpo.loss_type=sigmoid");
  EXPECT_TRUE(testing::is_clean_error(r, "dpo.loss_type: kto trains on it")) << r.second;
  r = testing::run_lathe_bounded(kto_args(dir, "bad6", 2) + " dpo.rpo_alpha=1");
  EXPECT_TRUE(testing::is_clean_error(r, "dpo.rpo_alpha")) << r.second;
  r = testing::run_lathe_bounded(kto_args(dir, "bad7", 2) + " dpo.loss_type=sigmoid data.train=recipes/dpo/tiny.jsonl"
                                                            " dpo.undesirable_weight=2");
  EXPECT_TRUE(testing::is_clean_error(r, "dpo.desirable_weight")) << r.second;
}

}  // namespace
}  // namespace lathe
