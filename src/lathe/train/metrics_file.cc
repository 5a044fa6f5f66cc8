#include "lathe/train/metrics_file.h"

#include <cmath>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/line_reader.h"

namespace lathe::train {

using nlohmann::json;


MetricsRead read_metrics(const std::string& path) {
  LineReader in = LineReader::open(path);  // a FIFO, folder or device: an IoError naming it, never a hang
  MetricsRead out;
  std::string text;
  for (int64_t n = 1; in.next(text); ++n) {
    if (text.empty()) continue;
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      out.problems.push_back(str_cat(path, ":", n, ": not valid JSON (skipped)"));
      continue;
    }
    if (!j.is_object()) {
      out.problems.push_back(str_cat(path, ":", n, ": not a JSON object (skipped)"));
      continue;
    }
    MetricsLine l{.line_no = n, .text = text, .record = j};
    if (j.contains("step")) {
      const json& s = j["step"];
      if (!s.is_number_integer() || s.get<int64_t>() < 0) {
        out.problems.push_back(str_cat(path, ":", n, ": step is ", json_for_message(s), " (not a step number; skipped)"));
        continue;
      }
      l.step = s.get<int64_t>();
    }
    out.lines.push_back(std::move(l));
  }
  return out;
}

std::optional<double> metrics_number(const MetricsLine& l, const std::string& key, const std::string& path,
                                     std::vector<std::string>* problems) {
  if (!l.record.contains(key)) return std::nullopt;
  const json& v = l.record[key];
  if (v.is_number() && std::isfinite(v.get<double>())) return v.get<double>();
  if (problems) problems->push_back(str_cat(path, ":", l.line_no, ": ", key, " is ", json_for_message(v), " (not a number; skipped)"));
  return std::nullopt;
}

}  // namespace lathe::train
