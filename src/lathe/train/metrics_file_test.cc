// read_metrics: good lines come back, bad ones are reported as "<path>:<line>: <why>", never thrown.
#include "lathe/train/metrics_file.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::train {
namespace {

TEST(MetricsFile, SkipsAndReportsBadLines) {
  const std::string path = testing::scratch_dir("metrics_file") + "/metrics.jsonl";
  std::ofstream(path) << "{\"event\":\"start\"}\n"
                         "{\"step\":1,\"loss\":2.5}\n"
                         "\n"
                         "{\"step\":2,\"val_loss\":null}\n"
                         "nonsense\n"
                         "7\n"
                         "{\"step\":-1}\n"
                         "{\"step\":3,\"loss\":2.";
  const MetricsRead m = read_metrics(path);
  ASSERT_EQ(m.lines.size(), 3u);
  EXPECT_FALSE(m.lines[0].step.has_value());
  EXPECT_EQ(m.lines[1].step, 1);
  EXPECT_EQ(m.lines[2].line_no, 4);
  ASSERT_EQ(m.problems.size(), 4u);
  EXPECT_EQ(m.problems[0], path + ":5: not valid JSON (skipped)");
  EXPECT_EQ(m.problems[1], path + ":6: not a JSON object (skipped)");
  EXPECT_EQ(m.problems[2], path + ":7: step is -1 (not a step number; skipped)");
  EXPECT_EQ(m.problems[3], path + ":8: not valid JSON (skipped)");

  std::vector<std::string> problems;
  EXPECT_EQ(metrics_number(m.lines[1], "loss", path, &problems), 2.5);
  EXPECT_EQ(metrics_number(m.lines[1], "lr", path, &problems), std::nullopt);  // absent: no problem
  EXPECT_EQ(metrics_number(m.lines[2], "val_loss", path, &problems), std::nullopt);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], path + ":4: val_loss is null (not a number; skipped)");

  EXPECT_THROW(read_metrics(path + ".missing"), IoError);
}

}  // namespace
}  // namespace lathe::train
