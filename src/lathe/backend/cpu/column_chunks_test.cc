#include "lathe/backend/cpu/column_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe::cpu {
namespace {

struct Call {
  int64_t j0, j1;
  std::thread::id thread;
};

// Every column in exactly one call: one call for all n (one worker), or each call one 64-column block
// (the last one ends at n).
void expect_each_column_once(const std::vector<Call>& calls, int64_t n) {
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const Call& c : calls) {
    if (calls.size() == 1 && c.j0 == 0 && c.j1 == n) {
      std::fill(seen.begin(), seen.end(), 1);
      break;
    }
    ASSERT_EQ(c.j0 % 64, 0) << "call [" << c.j0 << ", " << c.j1 << ")";
    ASSERT_EQ(c.j1, std::min(n, c.j0 + 64)) << "call [" << c.j0 << ", " << c.j1 << ")";
    for (int64_t j = c.j0; j < c.j1; ++j) ++seen[static_cast<size_t>(j)];
  }
  for (int64_t j = 0; j < n; ++j) ASSERT_EQ(seen[static_cast<size_t>(j)], 1) << "column " << j;
}

TEST(ColumnChunks, EveryColumnOnceInBlocks) {
  for (const int threads : {1, 2, 3, 8})
    for (const int64_t n : {1, 63, 64, 65, 700, 768, 2049}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, n " << n);
      ThreadPool pool(threads);
      std::mutex mu;
      std::vector<Call> calls;
      for_column_chunks(n, 4096, pool, [&](int64_t j0, int64_t j1) {
        const std::lock_guard<std::mutex> lock(mu);
        calls.push_back({j0, j1, std::this_thread::get_id()});
      });
      expect_each_column_once(calls, n);
      if (threads > 1 && n > 64) {
        EXPECT_GT(calls.size(), 1u) << "the columns were not split";
      }
    }
}

TEST(ColumnChunks, SmallProductsStayOnTheCaller) {
  ThreadPool pool(2);
  std::vector<Call> calls;  // no lock: a second thread writing here is the failure
  for_column_chunks(64, 64, pool, [&](int64_t j0, int64_t j1) { calls.push_back({j0, j1, std::this_thread::get_id()}); });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].thread, std::this_thread::get_id());
  EXPECT_EQ(calls[0].j1, 64);
}

// A worker that has finished its own share takes the blocks another has not reached: the caller's share
// (the first half) waits in its first block until the helper has taken one of the caller's blocks.
TEST(ColumnChunks, AnIdleWorkerTakesTheBlocksOfASlowOne) {
  ThreadPool pool(2);
  const int64_t n = 8 * 64;  // 8 blocks: 0-3 the caller's share, 4-7 the helper's
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::vector<Call> calls;
  std::atomic<bool> helper_took_a_caller_block{false};
  for_column_chunks(n, 4096, pool, [&](int64_t j0, int64_t j1) {
    const bool caller_share = j0 < n / 2;
    if (caller_share && std::this_thread::get_id() != caller) helper_took_a_caller_block = true;
    if (j0 == 0) {  // the caller's first block: slow until the helper has come for the rest of its share
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!helper_took_a_caller_block && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }
    const std::lock_guard<std::mutex> lock(mu);
    calls.push_back({j0, j1, std::this_thread::get_id()});
  });
  expect_each_column_once(calls, n);
  EXPECT_TRUE(helper_took_a_caller_block) << "the helper did not take any of the caller's blocks";
}

}  // namespace
}  // namespace lathe::cpu
