// `lathe plot --lifecycle`: one picture and one markdown table from the run folders of the lifecycle's
// stages (pre-train, SFT, GRPO), read from their metrics.jsonl and eval_tool_calls.json. The run folders are
// written by hand here, so every figure the table must show follows from the lines below.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "lathe/io/file_read.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

class LifecyclePlot : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("lathe_lifecycle_plot_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A run folder holding `metrics` as metrics.jsonl and, when given, `eval` as eval_tool_calls.json.
  std::string run_folder(const std::string& name, const std::string& metrics, const std::string& eval = "") {
    const std::string run = dir_ + "/" + name;
    fs::create_directories(run);
    std::ofstream(run + "/metrics.jsonl") << metrics;
    if (!eval.empty()) std::ofstream(run + "/eval_tool_calls.json") << eval;
    return run;
  }

  std::string dir_;
};

TEST_F(LifecyclePlot, DrawsEveryStageAndTabulatesItsFigures) {
  // Pre-training: losses 4, 3, 2 (first and last five: all three, mean 3), val 2.5 at the end, 65 s; no call made.
  const std::string pre = run_folder("quickstart",
                                     "{\"step\":1,\"loss\":4.0,\"elapsed_s\":1}\n"
                                     "{\"step\":2,\"loss\":3.0,\"elapsed_s\":2}\n"
                                     "{\"step\":3,\"loss\":2.0,\"elapsed_s\":65}\n"
                                     "{\"step\":3,\"val_loss\":2.5}\n",
                                     R"({"accuracy":0,"accuracy_stderr":0,"call_rate":0,"checks_passed":0,"n":200})");
  // SFT: loss 5 at step 1, then 1 (first five mean 1.8, last five 1.0), 120 s, not evaluated.
  std::string sft_lines;
  for (int s = 1; s <= 10; ++s)
    sft_lines += "{\"step\":" + std::to_string(s) + ",\"loss\":" + (s == 1 ? "5.0" : "1.0") + ",\"elapsed_s\":" +
                 std::to_string(12 * s) + "}\n";
  const std::string sft = run_folder("sft", sft_lines);
  // GRPO: reward means 0.5 then 0.9, with a correctness and a format reward; 58.5% +- 3.5% of 200 correct.
  std::string grpo_lines;
  for (int s = 1; s <= 10; ++s)
    grpo_lines += "{\"step\":" + std::to_string(s) + ",\"loss\":0.01,\"rewards/mean\":" + (s <= 5 ? "0.5" : "0.9") +
                  ",\"rewards/std\":0.1,\"rewards/correct\":0.7,\"rewards/format\":1.0,\"elapsed_s\":" +
                  std::to_string(25 * s) + "}\n";
  const std::string grpo =
      run_folder("grpo", grpo_lines,
                 R"({"accuracy":0.585,"accuracy_stderr":0.035,"call_rate":1,"checks_passed":0.9,"n":200})");

  const std::string svg = dir_ + "/lifecycle.svg", md = dir_ + "/lifecycle.md";
  const auto r = testing::run_lathe_bounded("plot --lifecycle pre-train=" + pre + " SFT=" + sft + " " + grpo +
                                            " --out " + svg + " --table " + md);
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string table = read_file(md);
  EXPECT_NE(r.second.find(table), std::string::npos) << "the table is printed too:\n" << r.second;
  EXPECT_NE(table.find("| pre-train | `" + pre + "` | 3 | 1m05s | loss 3.000 -> 3.000 (val 2.500) | 0.0% +- 0.0% (of 200) | 0.0% | 0.0% |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| SFT | `" + sft + "` | 10 | 2m00s | loss 1.800 -> 1.000 | not evaluated |"), std::string::npos)
      << table;
  // Named after its folder; the training column reads the reward, not GRPO's loss.
  EXPECT_NE(table.find("| grpo | `" + grpo + "` | 10 | 4m10s | reward 0.500 -> 0.900 | 58.5% +- 3.5% (of 200) | 100.0% | 90.0% |"),
            std::string::npos)
      << table;

  const std::string picture = read_file(svg);
  ASSERT_EQ(picture.rfind("<svg", 0), 0u) << picture.substr(0, 200);
  EXPECT_NE(picture.find("</svg>"), std::string::npos);
  for (const char* text : {"pre-train: loss", "SFT: loss", "grpo: reward", "correct: green", "format: orange",
                           "58.5%", "not evaluated"})
    EXPECT_NE(picture.find(text), std::string::npos) << text;
}

TEST_F(LifecyclePlot, NamesWhatItCannotRead) {
  auto r = testing::run_lathe_bounded("plot --lifecycle SFT=" + dir_ + "/absent --out " + dir_ + "/x.svg");
  EXPECT_NE(r.first, 0);
  EXPECT_NE(r.second.find(dir_ + "/absent/metrics.jsonl: cannot read"), std::string::npos) << r.second;

  const std::string run = run_folder("bad_eval", "{\"step\":1,\"loss\":1}\n", R"({"accuracy":"high","n":3})");
  r = testing::run_lathe_bounded("plot --lifecycle " + run + " --out " + dir_ + "/x.svg");
  EXPECT_NE(r.first, 0);
  EXPECT_NE(r.second.find(run + "/eval_tool_calls.json: \"accuracy\" must be a number"), std::string::npos) << r.second;
  EXPECT_FALSE(fs::exists(dir_ + "/x.svg"));

  r = testing::run_lathe_bounded("plot --lifecycle =" + run);
  EXPECT_NE(r.first, 0);
  EXPECT_NE(r.second.find("expected NAME=RUN_DIR"), std::string::npos) << r.second;
}

}  // namespace
}  // namespace lathe
