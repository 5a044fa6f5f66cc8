// Two independent GEMMs of about equal FLOPs (a layer's dx = g·W and dW = gᵀ·x; the gate and up
// projections of one input). On a 2-thread pool they run side by side as one-thread GEMMs: neither pays
// the barriers of a GEMM split over both workers (its shared A-block packing waits twice per K block),
// nor waits for a descheduled sibling on a shared host. Other pool sizes run them one after the other.
#pragma once

#include <cstdint>

#include "lathe/base/context.h"

namespace lathe {

// Runs product(task, pool) for task 0 and task 1; `both` says both have work (else no pairing).
template <class Fn>
void run_gemm_pair(bool both, Fn&& product) {
  const ThreadPool& pool = current_context().pool;
  if (both && pool.n_threads() == 2) {
    const ThreadPool serial(1);
    pool.parallel_for(2, [&](int64_t task, int) { product(task, serial); });
  } else {
    product(0, pool);
    product(1, pool);
  }
}

}  // namespace lathe
