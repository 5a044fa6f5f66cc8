// Test helpers: the training-loss lines of a run's metrics.jsonl, cut before "grad_norm" (step, loss and
// lr with every bit), so two runs can be compared exactly; the losses and other metrics as numbers.
#pragma once

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe::testing {

inline std::vector<std::string> loss_lines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (line.find("\"loss\"") != std::string::npos) out.push_back(line.substr(0, line.find(",\"grad_norm\"")));
  return out;
}

// The "loss" value of each line of loss_lines.
inline std::vector<double> loss_values(const std::vector<std::string>& lines) {
  std::vector<double> out;
  for (const std::string& l : lines) out.push_back(std::stod(l.substr(l.find("\"loss\":") + 7)));
  return out;
}

inline std::vector<double> loss_values(const std::string& run_dir) { return loss_values(loss_lines(run_dir)); }

// The value of an objective's metric `key` on each training-step line of metrics.jsonl (lines with a loss);
// NaN where it is null (a weighted metric with no items that step, e.g. KTO's rewards/chosen).
inline std::vector<double> step_metric(const std::string& run_dir, const std::string& key) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<double> out;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss") && j.contains(key)) out.push_back(j[key].is_null() ? NAN : j[key].get<double>());
  }
  return out;
}

// The mean of v[from, from + n): e.g. the loss of a run's first or last steps.
inline double mean_of(const std::vector<double>& v, size_t from, size_t n) {
  double s = 0;
  for (size_t i = from; i < from + n; ++i) s += v[i];
  return s / static_cast<double>(n);
}

}  // namespace lathe::testing
