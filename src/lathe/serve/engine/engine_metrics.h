// What the engine reports for /metrics (spec serving.md §10, vLLM's names in comments): gauges and
// counters read from the core after each step, and latency histograms fed from engine events on a
// monotonic clock (TTFT from the frontend's submit, inter-token gaps, end-to-end), per choice.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "lathe/serve/engine/engine_core.h"

namespace lathe {

using EngineClock = std::chrono::steady_clock;

// A latency histogram: counts[i] holds the observations in (bounds[i - 1], bounds[i]], counts.back()
// those above every bound; Prometheus's cumulative `le` buckets are the running sums of counts.
struct Histogram {
  std::vector<double> bounds;   // upper bounds in seconds, increasing
  std::vector<int64_t> counts;  // [bounds.size() + 1]
  double sum = 0;
  int64_t count = 0;

  explicit Histogram(std::span<const double> upper_bounds = {});
  void observe(double v);
};

// Bucket bounds in seconds, from a millisecond to an hour: steps fine where short requests land.
std::span<const double> ttft_buckets();
std::span<const double> inter_token_buckets();
std::span<const double> e2e_buckets();

struct EngineMetrics {
  EngineCoreStats core;            // num_requests_running / _waiting, kv_cache_usage_perc, prefix_cache_*, num_preemptions
  int64_t prompt_tokens = 0;       // vllm:prompt_tokens (counted at a request's first token)
  int64_t generation_tokens = 0;   // vllm:generation_tokens
  std::array<int64_t, static_cast<size_t>(FinishReason::kCount)> request_success{};  // by finish reason, per choice
  Histogram ttft{ttft_buckets()};               // vllm:time_to_first_token_seconds
  Histogram inter_token{inter_token_buckets()};  // vllm:inter_token_latency_seconds
  Histogram e2e{e2e_buckets()};                 // vllm:e2e_request_latency_seconds
};

// Turns the engine loop's events into EngineMetrics; engine thread only.
class EngineMetricsRecorder {
 public:
  void on_arrival(uint64_t request_id, int n_choices, int64_t n_prompt, EngineClock::time_point submitted);
  void on_output(const EngineOutput& o, EngineClock::time_point now);
  void set_core(const EngineCoreStats& s) { metrics_.core = s; }
  const EngineMetrics& metrics() const { return metrics_; }

 private:
  struct Timing {
    EngineClock::time_point submitted;
    int64_t n_prompt = 0;
    int n_open = 0;                                 // choices not finished
    bool counted_prompt = false;
    std::vector<EngineClock::time_point> last;      // per choice: its last token (submitted before the first)
    std::vector<bool> has_token;
  };
  EngineMetrics metrics_;
  std::unordered_map<uint64_t, Timing> requests_;
};

}  // namespace lathe
