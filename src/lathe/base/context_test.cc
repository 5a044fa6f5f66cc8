// ContextScope and the ThreadPool: a job's helper threads work in the submitting thread's context.
#include <gtest/gtest.h>

#include <atomic>

#include "lathe/base/context.h"

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

}  // namespace
}  // namespace lathe
