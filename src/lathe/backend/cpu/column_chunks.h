// How the skinny-M (decode) products of backend/cpu split the columns of y = x·Wᵀ (the rows of W) over the
// pool's workers: the f32 / bf16 / f16 GEMV (gemm.cc) and the quantised GEMV (quant_gemm.cc).
#pragma once

#include <algorithm>
#include <cstdint>

#include "lathe/base/thread_pool.h"

namespace lathe::cpu {

// fn(j0, j1) on one chunk of the n columns per worker, 64-column aligned so no two workers write one cache
// line of y; one worker when the product (n x k) is too small to pay for waking another.
template <class Fn>
void for_column_chunks(int64_t n, int64_t k, const ThreadPool& pool, const Fn& fn) {
  const int n_workers = k * n < (int64_t{1} << 16) ? 1 : pool.n_threads();
  const int64_t blocks = (n + 63) / 64;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(n_workers, blocks));
  pool.parallel_for(chunks, [&](int64_t t, int) {
    const int64_t j0 = std::min(n, blocks * t / chunks * 64), j1 = std::min(n, blocks * (t + 1) / chunks * 64);
    if (j0 < j1) fn(j0, j1);
  });
}

}  // namespace lathe::cpu
