// Shared by the whole-program benchmarks: Google Benchmark's argv with lathe's defaults added
// (3 repetitions, aggregates only), unless the command line already sets them.
#pragma once

#include <string>
#include <vector>

namespace lathe::bench {

// The returned pointers stay valid while `storage` lives.
inline std::vector<char*> args_with_median_defaults(int argc, char** argv, std::vector<std::string>& storage) {
  std::vector<char*> args(argv, argv + argc);
  bool has_reps = false, has_agg = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    has_reps |= a.rfind("--benchmark_repetitions", 0) == 0;
    has_agg |= a.rfind("--benchmark_report_aggregates_only", 0) == 0 || a.rfind("--benchmark_display_aggregates_only", 0) == 0;
  }
  storage = {"--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"};
  if (!has_reps) args.push_back(storage[0].data());
  if (!has_agg) args.push_back(storage[1].data());
  return args;
}

}  // namespace lathe::bench
