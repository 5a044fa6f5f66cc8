// Independent tasks that each run GEMMs (attention's per-head products; a layer's dx = g·W and
// dW = gᵀ·x; the gate and up projections of one input): either side by side, one task per worker with
// single-threaded GEMMs, or one after the other with GEMMs that use the whole pool. Side by side, no
// GEMM is split over workers, so none waits for a sibling the OS descheduled on a shared host.
#pragma once

#include <cstdint>

#include "lathe/base/context.h"

namespace lathe {

// Runs fn(task, worker, gemm_pool) for every task: in parallel with single-threaded GEMMs when there are
// enough tasks to fill the pool, otherwise one task at a time with GEMMs using the whole pool.
template <class Fn>
void run_tasks(int64_t n_tasks, Fn&& fn) {
  const ThreadPool& pool = current_context().pool;
  if (n_tasks >= pool.n_threads()) {
    const ThreadPool serial(1);
    pool.parallel_for(n_tasks, [&](int64_t task, int worker) { fn(task, worker, serial); });
  } else {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0, pool);
  }
}

// Two GEMM tasks of about equal FLOPs: product(task, gemm_pool) for task 0 and 1. `both` says both have
// work; else they run one after the other on the whole pool (the one with work uses every worker).
template <class Fn>
void run_gemm_pair(bool both, Fn&& product) {
  if (both) return run_tasks(2, [&](int64_t task, int, const ThreadPool& gemm_pool) { product(task, gemm_pool); });
  const ThreadPool& pool = current_context().pool;
  product(0, pool);
  product(1, pool);
}

}  // namespace lathe
