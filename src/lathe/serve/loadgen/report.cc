#include "lathe/serve/loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace lathe::loadgen {
namespace {

LatencyStats stats_ms(const std::vector<double>& seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  double sum = 0;
  for (double x : seconds) sum += x;
  const double mean = sum / static_cast<double>(seconds.size());
  double var = 0;
  for (double x : seconds) var += (x - mean) * (x - mean);
  s.mean_ms = mean * 1e3;
  s.std_ms = std::sqrt(var / static_cast<double>(seconds.size())) * 1e3;
  s.median_ms = percentile(seconds, 50) * 1e3;
  s.p90_ms = percentile(seconds, 90) * 1e3;
  s.p99_ms = percentile(seconds, 99) * 1e3;
  return s;
}

// Most requests in flight at once: +1 at each start, -1 at each end (ends first at equal times).
int64_t peak_in_flight(const std::vector<RequestRecord>& records) {
  std::vector<std::pair<double, int>> events;
  for (const RequestRecord& r : records) {
    events.push_back({r.start_s, +1});
    events.push_back({r.start_s + r.e2e_s, -1});
  }
  std::sort(events.begin(), events.end());
  int64_t now = 0, peak = 0;
  for (const auto& [t, d] : events) peak = std::max(peak, now += d);
  return peak;
}

nlohmann::ordered_json stats_json(const LatencyStats& s) {
  return {{"mean", s.mean_ms}, {"median", s.median_ms}, {"std", s.std_ms}, {"p90", s.p90_ms}, {"p99", s.p99_ms}};
}

}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

ServeBenchReport summarize(const std::vector<RequestRecord>& records, double duration_s) {
  ServeBenchReport r;
  r.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  std::map<int64_t, double> output_per_second;  // second of the run -> output tokens of requests ending then
  for (const RequestRecord& q : records) {
    if (!q.ok) {
      ++r.failed;
      if (r.errors.size() < 5) r.errors.push_back(q.error);
      continue;
    }
    ++r.completed;
    r.total_input_tokens += q.prompt_tokens;
    r.total_output_tokens += q.output_tokens;
    ttft.push_back(q.ttft_s);
    e2el.push_back(q.e2e_s);
    if (q.output_tokens > 1) tpot.push_back((q.e2e_s - q.ttft_s) / static_cast<double>(q.output_tokens - 1));
    itl.insert(itl.end(), q.itl_s.begin(), q.itl_s.end());
    output_per_second[static_cast<int64_t>(std::floor(q.start_s + q.e2e_s))] += static_cast<double>(q.output_tokens);
  }
  if (duration_s > 0) {
    r.request_throughput = static_cast<double>(r.completed) / duration_s;
    r.output_throughput = static_cast<double>(r.total_output_tokens) / duration_s;
    r.total_token_throughput = static_cast<double>(r.total_input_tokens + r.total_output_tokens) / duration_s;
  }
  for (const auto& [second, tokens] : output_per_second) r.peak_output_throughput = std::max(r.peak_output_throughput, tokens);
  r.peak_concurrency = peak_in_flight(records);
  r.ttft = stats_ms(ttft);
  r.tpot = stats_ms(tpot);
  r.itl = stats_ms(itl);
  r.e2el = stats_ms(e2el);
  return r;
}

std::string report_text(const ServeBenchReport& r) {
  std::string out;
  char line[160];
  const auto add = [&](const char* name, double v, const char* fmt = "%-36s %12.2f\n") {
    std::snprintf(line, sizeof line, fmt, name, v);
    out += line;
  };
  out += "============ Serving Benchmark Result ============\n";
  add("Successful requests:", static_cast<double>(r.completed), "%-36s %12.0f\n");
  add("Failed requests:", static_cast<double>(r.failed), "%-36s %12.0f\n");
  add("Benchmark duration (s):", r.duration_s);
  add("Total input tokens:", static_cast<double>(r.total_input_tokens), "%-36s %12.0f\n");
  add("Total generated tokens:", static_cast<double>(r.total_output_tokens), "%-36s %12.0f\n");
  add("Request throughput (req/s):", r.request_throughput);
  add("Output token throughput (tok/s):", r.output_throughput);
  add("Peak output token throughput (tok/s):", r.peak_output_throughput);
  add("Peak concurrent requests:", static_cast<double>(r.peak_concurrency), "%-36s %12.0f\n");
  add("Total token throughput (tok/s):", r.total_token_throughput);
  const std::pair<const char*, const LatencyStats*> groups[] = {
      {"Time to First Token", &r.ttft}, {"Time per Output Token (excl. 1st token)", &r.tpot},
      {"Inter-token Latency", &r.itl}, {"End-to-end Latency", &r.e2el}};
  const char* short_names[] = {"TTFT", "TPOT", "ITL", "E2EL"};
  for (int g = 0; g < 4; ++g) {
    std::snprintf(line, sizeof line, "%s\n", (std::string("---------------") + groups[g].first + "---------------").c_str());
    out += line;
    const LatencyStats& s = *groups[g].second;
    const std::string n = short_names[g];
    add(("Mean " + n + " (ms):").c_str(), s.mean_ms);
    add(("Median " + n + " (ms):").c_str(), s.median_ms);
    add(("P90 " + n + " (ms):").c_str(), s.p90_ms);
    add(("P99 " + n + " (ms):").c_str(), s.p99_ms);
  }
  out += "==================================================\n";
  for (const std::string& e : r.errors) out += "error: " + e + "\n";
  return out;
}

nlohmann::ordered_json report_json(const ServeBenchReport& r) {
  return {{"completed", r.completed},
          {"failed", r.failed},
          {"duration_s", r.duration_s},
          {"total_input_tokens", r.total_input_tokens},
          {"total_output_tokens", r.total_output_tokens},
          {"request_throughput", r.request_throughput},
          {"output_throughput", r.output_throughput},
          {"total_token_throughput", r.total_token_throughput},
          {"peak_output_throughput", r.peak_output_throughput},
          {"peak_concurrency", r.peak_concurrency},
          {"ttft_ms", stats_json(r.ttft)},
          {"tpot_ms", stats_json(r.tpot)},
          {"itl_ms", stats_json(r.itl)},
          {"e2el_ms", stats_json(r.e2el)},
          {"errors", r.errors}};
}

}  // namespace lathe::loadgen
