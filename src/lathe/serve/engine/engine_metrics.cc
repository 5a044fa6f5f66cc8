#include "lathe/serve/engine/engine_metrics.h"

#include <algorithm>

namespace lathe {
namespace {

constexpr double kTtftBuckets[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                   2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
constexpr double kInterTokenBuckets[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                         0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
constexpr double kE2eBuckets[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                  40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 3600.0};

double seconds(EngineClock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::span<const double> ttft_buckets() { return kTtftBuckets; }
std::span<const double> inter_token_buckets() { return kInterTokenBuckets; }
std::span<const double> e2e_buckets() { return kE2eBuckets; }

Histogram::Histogram(std::span<const double> upper_bounds)
    : bounds(upper_bounds.begin(), upper_bounds.end()), counts(upper_bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  // The first bound >= v holds it (Prometheus buckets are `le`).
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++counts[i];
  sum += v;
  ++count;
}

void EngineMetricsRecorder::on_arrival(uint64_t request_id, int n_choices, int64_t n_prompt,
                                       EngineClock::time_point submitted) {
  Timing t{.submitted = submitted, .n_prompt = n_prompt, .n_open = n_choices};
  t.last.assign(static_cast<size_t>(n_choices), submitted);
  t.has_token.assign(static_cast<size_t>(n_choices), false);
  requests_[request_id] = std::move(t);
}

void EngineMetricsRecorder::on_output(const EngineOutput& o, EngineClock::time_point now) {
  const auto it = requests_.find(o.request_id);
  if (it == requests_.end()) return;
  Timing& t = it->second;
  const size_t c = static_cast<size_t>(o.index);
  if (o.token) {
    ++metrics_.generation_tokens;
    if (!t.counted_prompt) {
      metrics_.prompt_tokens += t.n_prompt;
      t.counted_prompt = true;
    }
    (t.has_token[c] ? metrics_.inter_token : metrics_.ttft).observe(seconds(now - t.last[c]));
    t.has_token[c] = true;
    t.last[c] = now;
  }
  if (o.finish) {
    ++metrics_.request_success[static_cast<size_t>(*o.finish)];
    metrics_.e2e.observe(seconds(now - t.submitted));
    if (--t.n_open == 0) requests_.erase(it);
  }
}

}  // namespace lathe
