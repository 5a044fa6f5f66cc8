#include "lathe/train/run_metrics.h"

#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/train/metrics_file.h"

namespace lathe::train {

namespace fs = std::filesystem;

void RunMetrics::open(const std::string& run_dir, int64_t step, const std::function<void(const std::string&)>& note) {
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && fs::file_size(path, ec) > 0) {  // a resume
    std::string kept;
    if (step > 0) {
      MetricsRead m = read_metrics(path.string());
      for (const MetricsLine& l : m.lines) {
        if (l.step.value_or(0) > step) continue;  // logged after the checkpoint: trained again
        const size_t n_bad = m.problems.size();    // a loss that is not a number is dropped too
        for (const char* key : {"loss", "val_loss"}) metrics_number(l, key, path.string(), &m.problems);
        if (m.problems.size() == n_bad) kept += l.text + "\n";
      }
      for (const std::string& p : m.problems) note("warning: " + p);
    }
    write_file_atomic(path.string(), kept);
  }
  file_ = AppendFile::open(path.string());
  open_ = true;
}

void RunMetrics::log(const std::string& line) {
  if (!open_ || !error_.empty()) return;
  try {
    file_.append(line + "\n");
  } catch (const IoError& e) {
    error_ = e.what();
  }
}

void RunMetrics::sync() {
  if (!open_ || !error_.empty()) return;
  try {
    file_.sync();
  } catch (const IoError& e) {
    error_ = e.what();
  }
}

}  // namespace lathe::train
