#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "lathe/base/error.h"
#include "lathe/serve/loadgen/dataset.h"
#include "lathe/serve/loadgen/driver.h"
#include "lathe/serve/loadgen/report.h"
#include "lathe/serve/loadgen/stream_record.h"

namespace lathe::loadgen {
namespace {

TEST(LoadgenDataset, LengthsPrefixAndSeed) {
  const RandomDatasetOptions o{.n_requests = 50, .input_len = 100, .output_len = 20, .range_ratio = 0.25,
                               .prefix_len = 32, .vocab_size = 500, .seed = 3};
  const std::vector<BenchRequest> a = random_dataset(o), b = random_dataset(o);
  ASSERT_EQ(a.size(), 50u);
  bool lengths_vary = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);  // same seed, same dataset
    const int64_t own = static_cast<int64_t>(a[i].prompt.size()) - o.prefix_len;
    EXPECT_GE(own, 75);
    EXPECT_LE(own, 125);
    EXPECT_GE(a[i].max_tokens, 15);
    EXPECT_LE(a[i].max_tokens, 25);
    lengths_vary |= a[i].prompt.size() != a[0].prompt.size();
    EXPECT_TRUE(std::equal(a[i].prompt.begin(), a[i].prompt.begin() + o.prefix_len, a[0].prompt.begin()));
    for (int32_t t : a[i].prompt) EXPECT_TRUE(t >= 0 && t < 500);
  }
  EXPECT_TRUE(lengths_vary);
  RandomDatasetOptions other = o;
  other.seed = 4;
  EXPECT_NE(random_dataset(other)[0].prompt, a[0].prompt);
  other = o;
  other.range_ratio = 1.0;
  EXPECT_THROW(random_dataset(other), InvalidArgument);
  other = o;
  other.output_len = 0;
  EXPECT_THROW(random_dataset(other), InvalidArgument);
}

TEST(LoadgenDataset, ArrivalsArePoissonWithTheRequestedRate) {
  const std::vector<double> all_at_once = arrival_times(10, std::numeric_limits<double>::infinity(), 1.0, 0);
  EXPECT_EQ(all_at_once, std::vector<double>(10, 0.0));
  const int64_t n = 20000;
  const double rate = 50;
  const std::vector<double> t = arrival_times(n, rate, 1.0, 1);
  ASSERT_TRUE(std::is_sorted(t.begin(), t.end()));
  // Mean gap 1 / rate; an exponential's gaps have std equal to their mean (coefficient of variation 1).
  std::vector<double> gaps;
  for (int64_t i = 1; i < n; ++i) gaps.push_back(t[i] - t[i - 1]);
  double mean = 0, var = 0;
  for (double g : gaps) mean += g / static_cast<double>(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean) / static_cast<double>(gaps.size());
  EXPECT_NEAR(mean, 1 / rate, 0.03 / rate);
  EXPECT_NEAR(std::sqrt(var) / mean, 1.0, 0.05);
  // Burstiness 4: the same mean, less spread (CV = 1 / sqrt(4)).
  const std::vector<double> smooth = arrival_times(n, rate, 4.0, 1);
  double m2 = smooth.back() / static_cast<double>(n - 1);
  EXPECT_NEAR(m2, 1 / rate, 0.03 / rate);
  EXPECT_THROW(arrival_times(3, 0.0, 1.0, 0), InvalidArgument);
}

TEST(LoadgenReport, PercentileInterpolatesLikeNumpy) {
  const std::vector<double> v = {4, 1, 3, 2};  // sorted 1 2 3 4: position q/100 * 3
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3 + 0.7);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
}

TEST(LoadgenReport, SummaryFollowsTheDefinitions) {
  RequestRecord a{.ok = true, .prompt_tokens = 10, .output_tokens = 5, .start_s = 0, .ttft_s = 0.1, .e2e_s = 0.5,
                  .itl_s = {0.1, 0.1, 0.1, 0.1}};
  RequestRecord b{.ok = true, .prompt_tokens = 20, .output_tokens = 3, .start_s = 0.2, .ttft_s = 0.3, .e2e_s = 0.7,
                  .itl_s = {0.2, 0.2}};
  RequestRecord bad{.ok = false, .error = "HTTP 500", .start_s = 0.1, .e2e_s = 0.2};
  const ServeBenchReport r = summarize({a, b, bad}, 2.0);
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.total_input_tokens, 30);
  EXPECT_EQ(r.total_output_tokens, 8);
  EXPECT_DOUBLE_EQ(r.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(r.output_throughput, 4.0);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 19.0);
  EXPECT_NEAR(r.ttft.mean_ms, (100 + 300) / 2.0, 1e-9);
  // TPOT = (E2EL - TTFT) / (out - 1): a 0.1 s, b 0.2 s.
  EXPECT_NEAR(r.tpot.mean_ms, 150, 1e-9);
  EXPECT_NEAR(r.itl.mean_ms, (4 * 100 + 2 * 200) / 6.0, 1e-9);
  EXPECT_NEAR(r.e2el.median_ms, 600, 1e-9);
  EXPECT_EQ(r.peak_concurrency, 3);  // a [0, .5], bad [.1, .3] and b [.2, .9] overlap at .2
  EXPECT_EQ(r.errors, std::vector<std::string>{"HTTP 500"});
  EXPECT_NE(report_text(r).find("Successful requests:"), std::string::npos);
  EXPECT_EQ(report_json(r)["tpot_ms"]["mean"].get<double>(), r.tpot.mean_ms);
}

TEST(LoadgenStream, EventsSplitAnywhereGiveTheSameRecord) {
  const std::string body =
      "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
      "data: {\"choices\":[{\"text\":\"\"}]}\r\n\r\n"  // a token with no text (a special token) is a token
      "data: {\"choices\":[{\"text\":\"b\"}]}\n\n"
      "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"  // closing chunk: no token
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    SseParser p;
    StreamRecorder rec(4);
    double t = 0;
    const auto on = [&](const std::string& d) { rec.on_data(d, t += 0.25); };
    p.feed(std::string_view(body).substr(0, cut), on);
    p.feed(std::string_view(body).substr(cut), on);
    const RequestRecord r = rec.finish(2.0, 200);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_DOUBLE_EQ(r.ttft_s, 0.25);
    ASSERT_EQ(r.itl_s.size(), 2u);      // "a" at event 1, "" at event 2, "b" at event 3
    EXPECT_DOUBLE_EQ(r.itl_s[0], 0.25);
    EXPECT_DOUBLE_EQ(r.itl_s[1], 0.25);
    EXPECT_EQ(r.output_tokens, 3);
    EXPECT_DOUBLE_EQ(r.e2e_s, 2.0);
  }
}

TEST(LoadgenStream, FailuresAreNamed) {
  StreamRecorder missing_done(1);
  missing_done.on_data("{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}", 0.1);
  EXPECT_NE(missing_done.finish(0.2, 200).error.find("[DONE]"), std::string::npos);
  StreamRecorder http(1);
  EXPECT_EQ(http.finish(0.1, 400).error, "HTTP 400");
  StreamRecorder mid(1);
  mid.on_data("{\"choices\":[{\"text\":\"x\"}]}", 0.1);
  mid.on_data("{\"error\":{\"message\":\"engine died\"}}", 0.2);
  mid.on_data("[DONE]", 0.3);
  const RequestRecord r = mid.finish(0.3, 200);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("engine died"), std::string::npos);
}

// A client that takes 20 ms per request and notes the most requests it served at once.
class SleepyClient : public CompletionClient {
 public:
  RequestRecord send(const BenchRequest& req) override {
    const int now = ++in_flight_;
    int seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    --in_flight_;
    return {.ok = true, .prompt_tokens = static_cast<int64_t>(req.prompt.size()), .output_tokens = req.max_tokens,
            .ttft_s = 0.01, .e2e_s = 0.02};
  }
  std::atomic<int> in_flight_{0}, peak_{0};
};

TEST(LoadgenDriver, ConcurrencyCapAndArrivalsAreKept) {
  const std::vector<BenchRequest> reqs = random_dataset({.n_requests = 12, .input_len = 4, .output_len = 2});
  SleepyClient client;
  int64_t progress = 0;
  const RunResult r = run_requests(client, reqs, std::vector<double>(12, 0.0),
                                   {.max_concurrency = 3, .on_progress = [&](int64_t d, int64_t) { progress = d; }});
  EXPECT_EQ(client.peak_.load(), 3);
  EXPECT_EQ(progress, 12);
  EXPECT_GE(r.duration_s, 4 * 0.02 * 0.9);  // 12 requests, 3 at a time, 20 ms each
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(r.records[i].prompt_tokens, static_cast<int64_t>(reqs[i].prompt.size()));
  // Spread arrivals: each request starts no earlier than its time.
  std::vector<double> at(12);
  for (int i = 0; i < 12; ++i) at[i] = 0.01 * i;
  const RunResult spread = run_requests(client, reqs, at, {});
  for (int i = 0; i < 12; ++i) EXPECT_GE(spread.records[i].start_s, at[i] - 1e-3);
}

}  // namespace
}  // namespace lathe::loadgen
