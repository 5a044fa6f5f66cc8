// ThreadPool construction: thread counts outside [0, kMaxThreadCount] are rejected, and a failure to
// start a helper thread is an error (the started helpers are stopped), not a hang or std::terminate.
#include "lathe/base/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

#include "lathe/base/error.h"

namespace lathe {
namespace {

TEST(ThreadPool, RejectsThreadCountsOutOfRange) {
  EXPECT_THROW(ThreadPool(-3), InvalidArgument);
  EXPECT_THROW(ThreadPool(kMaxThreadCount + 1), InvalidArgument);
  try {
    ThreadPool p(-1);
    ADD_FAILURE() << "ThreadPool(-1) did not throw";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("-1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ThreadPool(3).n_threads(), 3);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LATHE_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LATHE_UNDER_SANITIZER 1
#endif
#endif

// In a child process whose address space is capped just above its current size, a pool of 400
// threads (~400 stacks of 2-8 MB) cannot start; the constructor must throw, and a small pool must still
// work afterwards (the failed one's helpers were joined, not leaked or left waiting).
[[noreturn]] void start_400_threads_under_an_address_space_limit() {
  long pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
  const rlimit rl{limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
  try {
    ThreadPool big(400);
    _exit(2);  // all 400 started: the limit did not bite
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
  }
  ThreadPool small(2);
  std::atomic<int> ran{0};
  small.parallel_for(2, [&](int64_t, int) { ++ran; });
  _exit(ran == 2 ? 0 : 4);
}

TEST(ThreadPool, ThreadStartFailureIsAnErrorNotAHang) {
#ifdef LATHE_UNDER_SANITIZER
  GTEST_SKIP() << "an address-space limit cannot be combined with a sanitizer's shadow memory";
#endif
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-exec: the parent has threads of its own
  EXPECT_EXIT(start_400_threads_under_an_address_space_limit(), ::testing::ExitedWithCode(0),
              "cannot start 400 threads");
  GTEST_FLAG_SET(death_test_style, style);
}

}  // namespace
}  // namespace lathe
