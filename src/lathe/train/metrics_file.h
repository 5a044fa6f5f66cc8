// Reading a run's metrics.jsonl (one JSON object per line: {"event":"start",...}, train steps
// {"step","loss","lr",...}, evals {"step","val_loss"}) robustly: a killed run leaves a torn last line, a
// NaN is written as null, and a file may have been edited or damaged. Readers (plot, --resume) get the
// good lines and a list of the bad ones, each named "<path>:<line>: <why>"; they never see a raw JSON error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace lathe::train {

struct MetricsLine {
  int64_t line_no = 0;    // 1-based
  std::string text;       // as in the file, without the newline
  nlohmann::json record;  // a JSON object
  std::optional<int64_t> step;  // absent for lines without a step (the start event)
};

struct MetricsRead {
  std::vector<MetricsLine> lines;     // the readable ones, in file order
  std::vector<std::string> problems;  // "<path>:<line>: <why> (skipped)"
};

// Throws IoError when the file cannot be opened. A line that is not a JSON object, or whose "step" is not
// a non-negative integer, is skipped and reported.
MetricsRead read_metrics(const std::string& path);

// `record[key]` as a finite number, or nothing (absent, null, a string, ...). When the key is present but
// not a number, adds "<path>:<line>: <key> is <value> (not a number; skipped)" to `problems`.
std::optional<double> metrics_number(const MetricsLine& l, const std::string& key, const std::string& path,
                                     std::vector<std::string>* problems);

}  // namespace lathe::train
