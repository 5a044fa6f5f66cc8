// Sends a dataset's requests at their arrival times, at most max_concurrency at once, each on its own
// thread through a CompletionClient, and collects what each request saw.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lathe/serve/loadgen/dataset.h"
#include "lathe/serve/loadgen/report.h"

namespace lathe::loadgen {

class CompletionClient {
 public:
  virtual ~CompletionClient() = default;
  // Sends one streamed completion request and blocks until its response has ended; times in the record
  // are from the send (start_s is set by the caller). Called from many threads at once.
  virtual RequestRecord send(const BenchRequest& request) = 0;
};

struct RunOptions {
  int64_t max_concurrency = 0;  // 0: no limit
  std::function<void(int64_t done, int64_t total)> on_progress;  // after each finished request
};

struct RunResult {
  std::vector<RequestRecord> records;  // in dataset order
  double duration_s = 0;               // first send to last response
};

RunResult run_requests(CompletionClient& client, const std::vector<BenchRequest>& requests,
                       const std::vector<double>& arrivals, const RunOptions& opts);

}  // namespace lathe::loadgen
