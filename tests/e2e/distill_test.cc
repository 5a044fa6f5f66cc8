// lathe distill end to end through the binary, on the shipped example (recipes/distill/tiny.yaml: the fixture
// Llama as the student, the wider fixture teacher, twelve conversations, the byte-level ChatML tokenizer):
// the loss falls, the KL per token is logged, the run ends with a Hugging Face folder (or a PEFT adapter with
// a lora: section), a SIGKILLed run resumes to exactly the uninterrupted losses, a teacher with another
// vocabulary is refused before training, and training from the teacher's top-k cached on disk (lathe
// distill-cache) logs the live top-k teacher's losses (packed or not, resumed, on two ranks), while a cache
// for other data or another k is refused. The on-policy recipe samples from the student on some steps.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
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
  std::tie(rc, out) = testing::run_lathe_two_ranks(distill_args(dir, "two", 8) + " run.threads=1");
  ASSERT_EQ(rc, 0) << out;
  testing::expect_same_losses(dir + "/one", dir + "/two", 8, out);
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

// The shipped on-policy recipe (recipes/distill/onpolicy-tiny.yaml, lmbda 0.5) end to end: some steps train on
// the student's own samples from the serving engine (on_policy 1, their length and sampling time logged), the
// others on the dataset's completions, and the run ends with a Hugging Face folder. A recipe that samples
// with a teacher cache, or with wrapped packing, stops before training.
TEST(DistillCli, OnPolicyRecipeSamplesFromTheStudent) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_onpolicy"));
  const std::string args = "distill recipes/distill/onpolicy-tiny.yaml sft.tokenizer=" + dir +
                           "/tokenizer run.threads=2 run.dir=" + dir + "/run";
  const auto [rc, out] = testing::run_lathe(args);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("on-policy: each step samples its completions from the student with probability 0.5"),
            std::string::npos) << out;
  EXPECT_NE(out.find("  sampling KV pool "), std::string::npos) << out;  // in the memory plan
  const std::vector<double> on = testing::step_metric(dir + "/run", "on_policy");
  const std::vector<double> len = testing::step_metric(dir + "/run", "completion_length");
  const std::vector<double> secs = testing::step_metric(dir + "/run", "sample_seconds");
  ASSERT_EQ(on.size(), 12u);
  ASSERT_EQ(len.size(), 12u);
  ASSERT_EQ(secs.size(), 12u);
  EXPECT_NE(std::count(on.begin(), on.end(), 1.0), 0);
  EXPECT_NE(std::count(on.begin(), on.end(), 0.0), 0);
  for (size_t i = 0; i < on.size(); ++i) {
    if (on[i] == 1.0) {
      EXPECT_GE(len[i], 1.0) << i;
      EXPECT_LE(len[i], 32.0) << i;  // distill.max_new_tokens
      EXPECT_GT(secs[i], 0.0) << i;
    } else {
      EXPECT_TRUE(std::isnan(len[i]) && std::isnan(secs[i])) << i;  // nothing sampled: null
    }
  }
  for (double l : testing::loss_values(dir + "/run")) EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "run" / "model" / "model.safetensors"));
  auto r = testing::run_lathe_bounded(args + "x distill.teacher=null distill.teacher_logits=t.kd distill.top_k=8");
  EXPECT_TRUE(testing::is_clean_error(r, "distill.teacher_logits")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/runx/checkpoints"));
  r = testing::run_lathe_bounded(args + "w sft.packing_strategy=wrapped");
  EXPECT_TRUE(testing::is_clean_error(r, "wrapped")) << r.second;
}

// The example conversations cut to their first exchange (about 55 tokens each), so that bfd packs two or more
// into a row of sft.max_length 128.
std::string short_conversations(const std::string& dir) {
  std::ifstream in("recipes/sft/tiny.jsonl");
  std::ofstream out(dir + "/short.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    j["messages"].erase(j["messages"].begin() + 2, j["messages"].end());
    out << j.dump() << "\n";
  }
  return dir + "/short.jsonl";
}

// The rows count of the "sft data: N examples, ...; R rows" start-up line.
std::pair<int, int> examples_and_rows(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("sft data: ([0-9]+) examples, .*; ([0-9]+) rows"))) return {0, 0};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

// The cache is written once, without packing; the shipped recipes/distill/tiny-cached.yaml reads it with bfd
// packing (several examples per row: its rows are keyed by example, not by training row) and without, shuffled,
// and logs the live teacher's losses at the same top_k.
TEST(DistillCli, CachedTopKLogitsTrainAsTheLiveTeacher) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_cache"));
  const std::string cache = dir + "/teacher_top32.kd";
  const std::string data = " data.train=" + short_conversations(dir), tok = " sft.tokenizer=" + dir + "/tokenizer";
  auto [rc, out] = testing::run_lathe("distill-cache recipes/distill/tiny.yaml distill.top_k=32 sft.packing=false"
                                      " run.threads=2 --out " + cache + data + tok);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("wrote " + cache), std::string::npos) << out;
  for (const char* packing : {"true", "false"}) {
    const std::string common = data + " distill.loss=jsd sft.packing=" + packing;
    const std::string live_run = std::string("live_") + packing;
    std::tie(rc, out) = testing::run_lathe(distill_args(dir, live_run, 6) + common + " distill.top_k=32");
    ASSERT_EQ(rc, 0) << out;
    const auto [n_examples, n_rows] = examples_and_rows(out);
    if (std::string(packing) == "true") {
      EXPECT_LT(n_rows, n_examples) << "bfd packs: " << out;
    }
    std::tie(rc, out) = testing::run_lathe("distill recipes/distill/tiny-cached.yaml run.dir=" + dir + "/cached_" +
                                           packing + " run.threads=2 schedule.steps=6 checkpoint.every=10" +
                                           " distill.teacher_logits=" + cache + common + tok);
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("top-32 logits from " + cache), std::string::npos) << out;
    const auto live = testing::loss_values(dir + "/live_" + packing);
    const auto cached = testing::loss_values(dir + "/cached_" + packing);
    ASSERT_EQ(live.size(), 6u);
    ASSERT_EQ(cached.size(), 6u);
    // The teacher ran on other batches when the cache was written: equal up to f32 rounding of its forward.
    for (size_t i = 0; i < live.size(); ++i)
      EXPECT_NEAR(cached[i], live[i], 1e-5 * std::abs(live[i])) << "packing " << packing << " step " << i + 1;
  }
  // The full-vocabulary loss differs from the top-32 one: the comparison above is not vacuous.
  std::tie(rc, out) = testing::run_lathe(distill_args(dir, "full", 6) + data + " distill.loss=jsd");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_GT(std::abs(testing::loss_values(dir + "/full")[0] - testing::loss_values(dir + "/live_true")[0]), 1e-4);
}

// Resuming from the cache: the data position comes back, and with it each row's cached teacher rows.
TEST(DistillCli, SigkillAndResumeFromTheCacheReproducesTheUninterruptedRun) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_cache_resume"));
  const std::string cache = dir + "/t16.kd", tok = " sft.tokenizer=" + dir + "/tokenizer";
  auto [rc, out] = testing::run_lathe("distill-cache recipes/distill/tiny.yaml distill.top_k=16 --out " + cache + tok);
  ASSERT_EQ(rc, 0) << out;
  const int steps = 100;
  auto args = [&](const std::string& run) {
    return "distill recipes/distill/tiny-cached.yaml distill.top_k=16 distill.teacher_logits=" + cache + tok +
           " run.dir=" + dir + "/" + run + " run.threads=2 checkpoint.every=10 schedule.steps=" + std::to_string(steps);
  };
  std::tie(rc, out) = testing::run_lathe(args("full"));
  ASSERT_EQ(rc, 0) << out;
  const auto want = testing::loss_lines(dir + "/full");
  ASSERT_EQ(want.size(), static_cast<size_t>(steps));
  const pid_t pid = testing::spawn_lathe_logged(args("killed"), dir + "/killed.log");
  ASSERT_GT(pid, 0);
  testing::wait_for_file(dir + "/killed/checkpoints/step_00000020/DONE");
  ASSERT_TRUE(testing::kill_and_reap(pid)) << "the run finished before it could be killed";
  std::tie(rc, out) = testing::run_lathe(args("killed") + " --resume");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resumed from"), std::string::npos) << out;
  EXPECT_EQ(testing::loss_lines(dir + "/killed"), want);
}

// Two ranks reading one cache (each its share of every batch) follow one process. Skipped without mpirun.
TEST(DistillCli, TwoRanksFromTheCacheEqualOneProcess) {
  if (testing::run_shell("command -v mpirun").first != 0) GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_cache_mpi"));
  const std::string cache = dir + "/t16.kd", tok = " sft.tokenizer=" + dir + "/tokenizer";
  auto [rc, out] = testing::run_lathe("distill-cache recipes/distill/tiny.yaml distill.top_k=16 --out " + cache + tok);
  ASSERT_EQ(rc, 0) << out;
  auto args = [&](const std::string& run) {
    return "distill recipes/distill/tiny-cached.yaml distill.top_k=16 distill.teacher_logits=" + cache + tok +
           " run.dir=" + dir + "/" + run + " run.threads=1 schedule.steps=8";
  };
  std::tie(rc, out) = testing::run_lathe(args("one"));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testing::run_lathe_two_ranks(args("two"));
  ASSERT_EQ(rc, 0) << out;
  testing::expect_same_losses(dir + "/one", dir + "/two", 8, out);
}

TEST(DistillCli, AMismatchedTeacherCacheStopsBeforeTraining) {
  const std::string dir = tokenizer_in(testing::scratch_dir("distill_cli_cache_bad"));
  const std::string cache = dir + "/t8.kd", tok = " sft.tokenizer=" + dir + "/tokenizer";
  auto [rc, out] = testing::run_lathe("distill-cache recipes/distill/tiny.yaml distill.top_k=8 --out " + cache + tok);
  ASSERT_EQ(rc, 0) << out;
  const std::string from_cache = " distill.teacher=null distill.teacher_logits=" + cache;
  auto r = testing::run_lathe_bounded(distill_args(dir, "k", 5) + from_cache + " distill.top_k=4");
  EXPECT_TRUE(testing::is_clean_error(r, "distill.top_k is 4")) << r.second;
  // Other data: every token trained (the cache has the assistant turns only).
  r = testing::run_lathe_bounded(distill_args(dir, "d", 5) + from_cache +
                                 " distill.top_k=8 sft.assistant_only_loss=false");
  EXPECT_TRUE(testing::is_clean_error(r, "written for other data")) << r.second;
  r = testing::run_lathe_bounded(distill_args(dir, "t", 5) + " distill.top_k=8 distill.teacher_logits=" + cache);
  EXPECT_TRUE(testing::is_clean_error(r, "both set")) << r.second;
  r = testing::run_lathe_bounded(distill_args(dir, "n", 5) + from_cache);  // no top_k
  EXPECT_TRUE(testing::is_clean_error(r, "needs distill.top_k")) << r.second;
  fs::resize_file(cache, fs::file_size(cache) - 100);
  r = testing::run_lathe_bounded(distill_args(dir, "c", 5) + from_cache + " distill.top_k=8");
  EXPECT_TRUE(testing::is_clean_error(r, "truncated")) << r.second;
  for (const char* run : {"k", "d", "t", "n", "c"}) EXPECT_FALSE(fs::exists(dir + "/" + run + "/checkpoints")) << run;
  r = testing::run_lathe_bounded("distill-cache recipes/distill/tiny.yaml --out " + dir + "/x.kd" + tok);  // no top_k
  EXPECT_TRUE(testing::is_clean_error(r, "distill.top_k > 0")) << r.second;
}

}  // namespace
}  // namespace lathe
