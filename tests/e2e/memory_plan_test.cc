// The memory plan before step 1 through the binary (docs/recipes.md "Memory plan"): every training command
// prints it; a budget it exceeds stops the run before step 1 with the report, leaving nothing a later run
// would take for an earlier one; memory.check warn trains anyway and off makes no plan; and the plan is in
// the range of what a run really takes.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

using testing::tokenizer_in;

namespace fs = std::filesystem;

const char* const kPlanHeader = "memory plan (per rank, before step 1):";

std::string sft_args(const std::string& dir, const std::string& run, int steps) {
  return "sft recipes/sft/tiny.yaml sft.tokenizer=" + dir + "/tokenizer run.dir=" + dir + "/" + run +
         " run.threads=2 schedule.steps=" + std::to_string(steps);
}

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

TEST(MemoryPlanCli, OverBudgetStopsBeforeStepOneWithTheReport) {
  const std::string dir = tokenizer_in(testing::scratch_dir("memory_plan_cli_over"));
  auto r = testing::run_lathe_bounded(sft_args(dir, "run", 5) + " memory.budget=1MB");
  EXPECT_TRUE(testing::is_clean_error(r, "the memory plan needs ")) << r.second;
  EXPECT_EQ(r.first, 1);
  for (const char* want : {kPlanHeader, "policy weights (f32 masters)", "AdamW m and v (f32)", "activations (",
                           "LM head logits", "of 976.6 KiB (memory.budget)", "stopped before step 1", "biggest:\n",
                           "or raise memory.budget"})
    EXPECT_TRUE(has(r.second, want)) << want << "\n" << r.second;
  // Two biggest items, each with what shrinks it.
  const std::regex two_biggest("biggest:\n  [^\n]+\\): [^\n]+\n  [^\n]+\\): [^\n]+\n");
  EXPECT_TRUE(std::regex_search(r.second, two_biggest)) << r.second;
  EXPECT_FALSE(has(r.second, "step 1/5")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/run/checkpoints"));
  EXPECT_FALSE(fs::exists(dir + "/run/metrics.jsonl") && fs::file_size(dir + "/run/metrics.jsonl") > 0);
  EXPECT_FALSE(fs::exists(dir + "/run/model"));
  // The same command with room in the budget starts afresh in that folder: no --overwrite needed.
  r = testing::run_lathe_bounded(sft_args(dir, "run", 5));
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_TRUE(has(r.second, kPlanHeader)) << r.second;
  EXPECT_TRUE(has(r.second, "(MemAvailable)")) << r.second;
  EXPECT_EQ(testing::loss_values(dir + "/run").size(), 5u);
}

TEST(MemoryPlanCli, WarnTrainsAnywayAndOffMakesNoPlan) {
  const std::string dir = tokenizer_in(testing::scratch_dir("memory_plan_cli_warn"));
  auto r = testing::run_lathe_bounded(sft_args(dir, "warn", 3) + " memory.budget=1MB memory.check=warn");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_TRUE(has(r.second, kPlanHeader)) << r.second;
  EXPECT_TRUE(has(r.second, "warning: the memory plan exceeds the budget")) << r.second;
  EXPECT_EQ(testing::loss_values(dir + "/warn").size(), 3u);
  r = testing::run_lathe_bounded(sft_args(dir, "off", 3) + " memory.budget=1MB memory.check=off");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_FALSE(has(r.second, "memory plan")) << r.second;
  EXPECT_EQ(testing::loss_values(dir + "/off").size(), 3u);
}

// "812.0 MiB" -> bytes (memory_bytes_human's units).
double bytes_of(const std::string& number, const std::string& unit) {
  const double v = std::stod(number);
  if (unit == "B") return v;
  if (unit == "KiB") return v * 1024;
  if (unit == "MiB") return v * 1024 * 1024;
  if (unit == "GiB") return v * 1024 * 1024 * 1024;
  ADD_FAILURE() << "unit " << unit;
  return 0;
}

// The plan against the run's measured growth (peak resident set, VmHWM, above the resident set at the
// loop's start), loosely: within a factor of 4 either way. The micro-batch is made large (32 rows of the
// tiny model, so the plan is tens of MiB) for the plan to dominate the run's other allocations.
TEST(MemoryPlanCli, PlanIsInTheRangeOfThePeakResidentSet) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine inflate the resident set (make asan)";
#endif
  const std::string dir = tokenizer_in(testing::scratch_dir("memory_plan_cli_peak"));
  const auto r = testing::run_lathe_bounded(sft_args(dir, "run", 2) + " data.batch_size=32 sft.packing=false");
  ASSERT_EQ(r.first, 0) << r.second;
  std::smatch m;
  const std::string unit = "([0-9.]+) (B|KiB|MiB|GiB)";
  ASSERT_TRUE(std::regex_search(r.second, m, std::regex("memory: peak resident " + unit + ", " + unit +
                                                        " above the start; planned " + unit)))
      << r.second;
  const double growth = bytes_of(m[3], m[4]), plan = bytes_of(m[5], m[6]);
  EXPECT_LT(plan, 4 * growth) << r.second;
  EXPECT_LT(growth, 4 * plan) << r.second;
}

TEST(MemoryPlanCli, EveryTrainingObjectivePlansWithItsOwnItems) {
  const std::string dir = tokenizer_in(testing::scratch_dir("memory_plan_cli_objectives"));
  const std::string common = " run.threads=2 schedule.steps=2 run.dir=" + dir + "/";
  // DPO: the policy's frozen copy as the reference, and the cached reference log-probs.
  auto r = testing::run_lathe_bounded("dpo recipes/dpo/tiny.yaml dpo.tokenizer=" + dir + "/tokenizer" + common + "dpo");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_TRUE(has(r.second, "reference model (f32, frozen)")) << r.second;
  EXPECT_TRUE(has(r.second, "cached reference log-probs")) << r.second;
  // SimPO has no reference: neither item.
  r = testing::run_lathe_bounded("dpo recipes/dpo/tiny.yaml dpo.loss_type=simpo dpo.tokenizer=" + dir + "/tokenizer" +
                                 common + "simpo");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_TRUE(has(r.second, kPlanHeader)) << r.second;
  EXPECT_FALSE(has(r.second, "reference model")) << r.second;
  // KTO.
  r = testing::run_lathe_bounded("dpo recipes/dpo/kto-tiny.yaml dpo.tokenizer=" + dir + "/tokenizer" + common + "kto");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_TRUE(has(r.second, "reference model (f32, frozen)")) << r.second;
  // Distillation: the teacher, and its own head in place of the fused one.
  r = testing::run_lathe_bounded("distill recipes/distill/tiny.yaml sft.tokenizer=" + dir + "/tokenizer" + common +
                                 "distill");
  ASSERT_EQ(r.first, 0) << r.second;
  for (const char* want : {"teacher weights", "teacher activations", "distillation head"})
    EXPECT_TRUE(has(r.second, want)) << want << "\n" << r.second;
  EXPECT_FALSE(has(r.second, "LM head logits")) << r.second;
  // A distillation over budget stops as the others do.
  r = testing::run_lathe_bounded("distill recipes/distill/tiny.yaml sft.tokenizer=" + dir + "/tokenizer" + common +
                                 "distill_over memory.budget=100KiB");
  EXPECT_TRUE(testing::is_clean_error(r, "the memory plan needs ")) << r.second;
  // Pre-training runs the same loop: 4 windows of 32 tokens on the quickstart model.
  r = testing::prepare_world_data(dir, 100);
  ASSERT_EQ(r.first, 0) << r.second;
  r = testing::run_lathe_bounded("pretrain recipes/quickstart.yaml data.train=" + dir + "/data/world data.val=" + dir +
                                 "/data/world data.seq_len=32 data.batch_size=4 schedule.warmup_steps=0 --no-samples" +
                                 common + "pretrain memory.budget=1MB");
  EXPECT_TRUE(testing::is_clean_error(r, "the memory plan needs ")) << r.second;
  EXPECT_TRUE(has(r.second, "activations (128 tokens)")) << r.second;
}

}  // namespace
}  // namespace lathe
