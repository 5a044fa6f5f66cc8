// Everything a computation needs from its surroundings: worker threads and memory.
// Passed explicitly (STYLE §13); ops reach it through ContextScope, which the caller sets for a region,
// so two engines with different thread counts can share a process.
#pragma once

#include <cstdint>
#include <memory>

#include "lathe/base/allocator.h"
#include "lathe/base/thread_pool.h"

namespace lathe {

struct Context {
  explicit Context(int n_threads = 0) : pool(n_threads) {}
  ThreadPool pool;
  Allocator alloc;  // tensor storage comes from here
};

// The context of the calling thread: the innermost live ContextScope, else a process default with all
// hardware threads (or LATHE_NUM_THREADS).
Context& current_context();

// LATHE_NUM_THREADS when set and not empty, else 0 (a ThreadPool's "all hardware threads"). Throws
// InvalidArgument naming the variable unless it is an integer in [0, kMaxThreadCount].
int default_thread_count();
// The thread count a caller asked for (--threads, run.threads): itself when > 0, else default_thread_count().
inline int resolve_thread_count(int requested) { return requested > 0 ? requested : default_thread_count(); }

// The innermost live ContextScope's context, or nullptr (the thread uses the process default). A
// ThreadPool hands this to its helper threads for the length of a job, so work a job does on a helper
// (a GEMM's scratch, a tensor) draws on the submitting thread's context, not the process default.
Context* scoped_context();

class ContextScope {
 public:
  explicit ContextScope(Context& ctx) : ContextScope(&ctx) {}
  explicit ContextScope(Context* ctx);  // nullptr: the process default
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

 private:
  Context* previous_;
};

}  // namespace lathe
