// The Prometheus text of hand-made metrics: vLLM's names, `_total` counters, cumulative buckets that end
// at +Inf = count, and the model_name label on every series.
#include "lathe/serve/engine/prometheus_text.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(PrometheusText, NamesCountersAndCumulativeBuckets) {
  EngineMetrics m;
  m.core.n_running = 3;
  m.core.kv_cache_usage = 0.25;
  m.core.prefix_cache_hits = 32;
  m.generation_tokens = 7;
  m.request_success[static_cast<size_t>(FinishReason::kLength)] = 2;
  for (const double v : {0.0005, 0.003, 0.003, 5000.0}) m.ttft.observe(v);  // 5000 s: above every bound
  const std::string t = prometheus_text(m, "tiny");
  EXPECT_TRUE(has_line(t, "vllm:num_requests_running{model_name=\"tiny\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "vllm:kv_cache_usage_perc{model_name=\"tiny\"} 0.25")) << t;
  EXPECT_TRUE(has_line(t, "vllm:prefix_cache_hits_total{model_name=\"tiny\"} 32")) << t;
  EXPECT_TRUE(has_line(t, "vllm:generation_tokens_total{model_name=\"tiny\"} 7")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE vllm:generation_tokens_total counter")) << t;
  EXPECT_TRUE(has_line(t, "vllm:request_success_total{finished_reason=\"length\",model_name=\"tiny\"} 2")) << t;
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"tiny\"} 1")) << t;
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"tiny\"} 3")) << t;
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"tiny\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "vllm:time_to_first_token_seconds_count{model_name=\"tiny\"} 4")) << t;
  EXPECT_TRUE(has_line(t, "# TYPE vllm:e2e_request_latency_seconds histogram")) << t;
  EXPECT_NE(prometheus_text(m, "a\"b").find("model_name=\"a\\\"b\""), std::string::npos);
}

}  // namespace
}  // namespace lathe
