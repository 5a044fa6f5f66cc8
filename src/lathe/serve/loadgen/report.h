// The figures of a `lathe bench serve` run (spec serving.md section 11): per request TTFT (send -> first
// token), E2EL (send -> last byte), TPOT = (E2EL - TTFT) / (output tokens - 1) and every inter-token gap
// (ITL); over the run request / output / total token throughput, peak output throughput (per second of
// the run) and peak concurrency; each latency as mean, median, std, p90 and p99 in milliseconds.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe::loadgen {

// One request as the client saw it. Times in seconds; start_s from the start of the run.
struct RequestRecord {
  bool ok = false;
  std::string error;  // why it failed (HTTP status and message, transport error)
  int64_t prompt_tokens = 0, output_tokens = 0;
  double start_s = 0, ttft_s = 0, e2e_s = 0;
  std::vector<double> itl_s;  // gaps between consecutive streamed tokens
};

struct LatencyStats {
  double mean_ms = 0, median_ms = 0, std_ms = 0, p90_ms = 0, p99_ms = 0;
};

struct ServeBenchReport {
  int64_t completed = 0, failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;  // per second
  double peak_output_throughput = 0;  // most output tokens finished in one second of the run
  int64_t peak_concurrency = 0;       // most requests in flight at once
  LatencyStats ttft, tpot, itl, e2el;
  std::vector<std::string> errors;  // the first few failures' messages
};

// Percentile q in [0, 100] of `v` with linear interpolation between order statistics (numpy's default).
double percentile(std::vector<double> v, double q);

// Latency statistics of the completed requests only; throughputs over `duration_s` (the whole run).
ServeBenchReport summarize(const std::vector<RequestRecord>& records, double duration_s);

std::string report_text(const ServeBenchReport& r);
nlohmann::ordered_json report_json(const ServeBenchReport& r);

}  // namespace lathe::loadgen
