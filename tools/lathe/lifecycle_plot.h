// `lathe plot --lifecycle STAGE...`: the whole lifecycle on one picture and one table. Each stage is a run
// folder (NAME=RUN_DIR, or RUN_DIR named by its folder) of `lathe pretrain`, `sft` or `grpo`; its curve is read
// from RUN_DIR/metrics.jsonl (loss with validation points, or the rewards of a GRPO run), and its held-out
// accuracy from RUN_DIR/eval_tool_calls.json (`lathe eval MODEL --tool-calls FILE --out ...`) when present.
//   picture: one curve panel per stage side by side, and below them the accuracy of every stage as bars
//   table:   stage | steps | time | last train figure | exact accuracy +- s.e. | well-formed calls | checks passed
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace lathe::cli {

struct LifecycleStage {
  std::string name;     // "SFT"
  std::string run_dir;  // "runs/lifecycle-sft"
};

// "NAME=DIR" or "DIR" (named after the folder).
LifecycleStage parse_lifecycle_stage(const std::string& arg);

// The held-out figures of one stage (eval_tool_calls.json), as `lathe eval --tool-calls --out` writes them.
struct StageAccuracy {
  double accuracy = 0, accuracy_stderr = 0, call_rate = 0, partial = 0;
  long n = 0;
};

// Writes the SVG to svg_path; returns the markdown table (one row per stage).
std::string write_lifecycle_plot(const std::vector<LifecycleStage>& stages, const std::string& svg_path);

}  // namespace lathe::cli
