#include "lathe/serve/loadgen/driver.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "lathe/base/error.h"

namespace lathe::loadgen {

RunResult run_requests(CompletionClient& client, const std::vector<BenchRequest>& requests,
                       const std::vector<double>& arrivals, const RunOptions& opts) {
  LATHE_CHECK_ARG(arrivals.size() == requests.size(), "[bench serve] ", requests.size(), " requests but ",
                  arrivals.size(), " arrival times");
  LATHE_CHECK_ARG(opts.max_concurrency >= 0, "[bench serve] --max-concurrency must be >= 0, got ", opts.max_concurrency);
  using clock = std::chrono::steady_clock;
  RunResult result;
  result.records.resize(requests.size());
  std::mutex mu;
  std::condition_variable slot_free;
  int64_t in_flight = 0, done = 0;
  const int64_t limit = opts.max_concurrency > 0 ? opts.max_concurrency : static_cast<int64_t>(requests.size());
  std::vector<std::thread> threads;
  threads.reserve(requests.size());
  const clock::time_point t0 = clock::now();
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(arrivals[i])));
    {
      std::unique_lock<std::mutex> lk(mu);
      slot_free.wait(lk, [&] { return in_flight < limit; });
      ++in_flight;
    }
    threads.emplace_back([&, i] {
      const double start = std::chrono::duration<double>(clock::now() - t0).count();
      RequestRecord r = client.send(requests[i]);
      r.start_s = start;
      std::lock_guard<std::mutex> lk(mu);
      result.records[i] = std::move(r);
      --in_flight;
      ++done;
      if (opts.on_progress) opts.on_progress(done, static_cast<int64_t>(requests.size()));
      slot_free.notify_one();
    });
  }
  for (std::thread& t : threads) t.join();
  result.duration_s = std::chrono::duration<double>(clock::now() - t0).count();
  return result;
}

}  // namespace lathe::loadgen
