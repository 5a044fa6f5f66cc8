// The metrics.jsonl a run writes (rank 0 only; train/metrics_file.h reads it): one JSON object per line,
// the start event, train steps and evals. A failed write does not throw where it happens: the first error
// is kept ("<path>: write failed: <errno text>") so the loop can stop every rank at the same step, after a
// last checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "lathe/io/append_file.h"

namespace lathe::train {

class RunMetrics {
 public:
  // Rank 0: opens <run_dir>/metrics.jsonl for appending. An earlier file is cut to the lines of steps
  // <= `step` (a resume: later ones are trained again; step 0: emptied), and lines whose loss is not a
  // number dropped, each problem told to `note` as a warning. Throws IoError.
  void open(const std::string& run_dir, int64_t step, const std::function<void(const std::string&)>& note);

  // Appends one line (no-op when not open, or after a failure).
  void log(const std::string& line);
  // fdatasync: the lines so far become durable with the checkpoint being written.
  void sync();

  // The first failure, "" while every write succeeded.
  const std::string& error() const { return error_; }

 private:
  AppendFile file_;
  bool open_ = false;
  std::string error_;
};

}  // namespace lathe::train
