// Test helper: the training-loss lines of a run's metrics.jsonl, cut before "grad_norm" (step, loss and
// lr with every bit), so two runs can be compared exactly.
#pragma once

#include <fstream>
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

}  // namespace lathe::testing
