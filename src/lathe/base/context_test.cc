// ContextScope and the ThreadPool: a job's helper threads work in the submitting thread's context.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "lathe/base/context.h"
#include "lathe/base/error.h"

namespace lathe {
namespace {

TEST(Context, PoolHelpersSeeTheSubmittersScopedContext) {
  Context outer(1), job_ctx(1);
  ThreadPool pool(2);
  std::atomic<int> saw_job_ctx{0}, saw_default{0};
  {
    const ContextScope scope(job_ctx);
    pool.run_on_workers(2, [&](int, int) { saw_job_ctx += &current_context() == &job_ctx; });
  }
  // Without a scope the helpers use the process default, as the caller does.
  pool.run_on_workers(2, [&](int, int) { saw_default += scoped_context() == nullptr; });
  EXPECT_EQ(saw_job_ctx.load(), 2);
  EXPECT_EQ(saw_default.load(), 2);
  // Scopes nest and restore.
  {
    const ContextScope a(outer);
    {
      const ContextScope b(job_ctx);
      EXPECT_EQ(&current_context(), &job_ctx);
    }
    EXPECT_EQ(&current_context(), &outer);
  }
  EXPECT_EQ(scoped_context(), nullptr);
}

// Sets LATHE_NUM_THREADS for one scope and restores what was there.
class ScopedThreadsEnv {
 public:
  explicit ScopedThreadsEnv(const char* value) {
    if (const char* old = std::getenv("LATHE_NUM_THREADS")) old_ = old, had_ = true;
    ::setenv("LATHE_NUM_THREADS", value, 1);
  }
  ~ScopedThreadsEnv() {
    if (had_) ::setenv("LATHE_NUM_THREADS", old_.c_str(), 1);
    else ::unsetenv("LATHE_NUM_THREADS");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(Context, LatheNumThreadsIsReadWholeAndInRange) {
  {
    const ScopedThreadsEnv env("3");
    EXPECT_EQ(default_thread_count(), 3);
  }
  {
    const ScopedThreadsEnv env("");  // empty: as unset
    EXPECT_EQ(default_thread_count(), 0);
  }
  {
    const ScopedThreadsEnv env("0");
    EXPECT_EQ(default_thread_count(), 0);
  }
  for (const char* bad : {"abc", "-3", "4x", " 2", "+2", "1.5", "99999999999999999999", "100000"}) {
    const ScopedThreadsEnv env(bad);
    try {
      default_thread_count();
      ADD_FAILURE() << "LATHE_NUM_THREADS=" << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("LATHE_NUM_THREADS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lathe
