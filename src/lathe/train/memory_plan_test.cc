#include "lathe/train/memory_plan.h"

#include <gtest/gtest.h>

namespace lathe::train {
namespace {

int64_t item(const std::vector<MemoryPlanItem>& items, const std::string& name) {
  for (const auto& it : items)
    if (it.name == name) return it.bytes;
  return -1;
}

TEST(MemoryPlan, FullFineTuneCountsAllParams) {
  MemoryPlanInputs in;
  in.total_params = 1000;
  in.trainable_params = 1000;
  in.weight_bytes_per_param = 2;
  auto items = memory_plan_items(in);
  EXPECT_EQ(item(items, "policy weights"), 2000);
  EXPECT_EQ(item(items, "AdamW state (2 x f32)"), 8 * 1000);
  EXPECT_EQ(item(items, "gradients (trainable, f32)"), 4 * 1000);
  EXPECT_EQ(item(items, "reference model"), -1);
}

TEST(MemoryPlan, LoraCountsOnlyAdapters) {
  MemoryPlanInputs in;
  in.total_params = 1000000;
  in.trainable_params = 500;
  auto items = memory_plan_items(in);
  EXPECT_EQ(item(items, "AdamW state (2 x f32)"), 8 * 500);
  EXPECT_EQ(item(items, "gradients (trainable, f32)"), 4 * 500);
}

TEST(MemoryPlan, ActivationsAndChunksMatchFormula) {
  MemoryPlanInputs in;
  in.batch = 2; in.seq_len = 16; in.hidden = 8; in.layers = 3; in.intermediate = 32; in.heads = 2;
  in.vocab = 100; in.logprob_chunk_rows = 64; in.reference_params = 10;
  auto items = memory_plan_items(in);
  EXPECT_EQ(memory_plan_activation_bytes(in), 4 * 2 * 16 * 3 * (6 * 8 + 3 * 32 + 2 * 16));
  EXPECT_EQ(item(items, "log-prob / CE chunk"), 64 * 100 * 4);
  EXPECT_EQ(item(items, "reference model"), 40);
  EXPECT_NE(memory_plan_table(items, 1 << 20).find("budget"), std::string::npos);
}

TEST(MemoryPlan, MeminfoAndCheck) {
  EXPECT_EQ(memory_plan_parse_meminfo("MemTotal: 100 kB\nMemAvailable:   2048 kB\n"), 2048 * 1024);
  EXPECT_EQ(memory_plan_parse_meminfo("MemTotal: 100 kB\n"), -1);
  MemoryPlanInputs in;
  in.total_params = 1000;
  in.trainable_params = 1000;
  auto items = memory_plan_items(in);
  EXPECT_TRUE(memory_plan_check(items, memory_plan_total(items)).empty());
  std::string err = memory_plan_check(items, 100);
  EXPECT_NE(err.find("biggest: AdamW state"), std::string::npos);
  EXPECT_NE(err.find("micro-batch size"), std::string::npos);
}

}  // namespace
}  // namespace lathe::train
