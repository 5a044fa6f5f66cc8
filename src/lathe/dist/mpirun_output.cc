#include "lathe/dist/mpirun_output.h"

#include <regex>

namespace lathe::dist {

namespace {

std::vector<int> rank_list(const std::string& s) {  // "1,3" -> {1, 3}
  std::vector<int> out;
  for (size_t i = 0; i < s.size();) {
    size_t used = 0;
    out.push_back(std::stoi(s.substr(i), &used));
    i += used + 1;
  }
  return out;
}

}  // namespace

void scan_job_line(const std::string& line, JobReport& r) {
  static const std::regex resumed(R"(resumed from (\S+) at step (\d+))");
  // Ours (dist/communicator.cc): names the ranks that did not answer the roll call.
  static const std::regex timeout(R"((collective timeout: .*?(?:ranks? ([0-9,]+) did not answer.*|every rank answered.*)))");
  // mpirun (OpenMPI 4): "mpirun noticed that process rank 1 with PID 123 on node n1 exited on signal 9 (Killed)."
  static const std::regex signalled(R"(process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+) ?(\([^)]*\))?)");
  static const std::regex errored(R"(^(?:\[[^\]]*\]\s*)?lathe [a-z-]+: error: (.*))");
  std::smatch m;
  if (std::regex_search(line, m, resumed)) {
    r.resumed_from = m[1].str();
    r.resumed_step = std::stoll(m[2].str());
  }
  if (r.cause_weight < 3 && std::regex_search(line, m, timeout)) {
    r.failure = m[1].str();
    r.failed_ranks = m[2].matched ? rank_list(m[2].str()) : std::vector<int>{};
    r.cause_weight = 3;
  } else if (r.cause_weight < 2 && std::regex_search(line, m, signalled)) {
    const std::string pid = m[2].str() == "0" ? "" : "pid " + m[2].str() + " ";  // mpirun may not know it
    r.failure = "rank " + m[1].str() + " (" + pid + "on " + m[3].str() + ") exited on signal " + m[4].str() +
                (m[5].matched ? " " + m[5].str() : "");
    r.failed_ranks = {std::stoi(m[1].str())};
    r.cause_weight = 2;
  } else if (r.cause_weight < 1 && std::regex_search(line, m, errored)) {
    r.failure = m[1].str();
    r.cause_weight = 1;
  }
}

}  // namespace lathe::dist
