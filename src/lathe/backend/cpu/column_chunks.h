// How the skinny-M (decode) products of backend/cpu split the columns of y = x·Wᵀ (the rows of W) over the
// pool's workers: the f32 / bf16 / f16 GEMV (gemm.cc) and the quantised GEMV (quant_gemm.cc).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "lathe/base/thread_pool.h"

namespace lathe::cpu {

// fn(j0, j1) over the n columns in blocks of 64 (no two workers write one cache line of y); one worker
// when the product (n x k) is too small to pay for waking another. Each worker owns a contiguous share of
// the blocks and takes them one at a time from the front; when its share is done it takes the next blocks
// of the other shares. A helper wakes about a microsecond after the caller starts, which is a fifth of a
// small model's 768 x 768 int4 GEMV: with fixed shares the caller then waited for it (4-18% of a tiny-110M
// token on Zen 5), now it takes the blocks the helper has not reached. Every column is computed by one
// fn call on a block boundary, so the result does not depend on which worker ran it.
template <class Fn>
void for_column_chunks(int64_t n, int64_t k, const ThreadPool& pool, const Fn& fn) {
  const int n_workers = k * n < (int64_t{1} << 16) ? 1 : pool.n_threads();
  const int64_t blocks = (n + 63) / 64;
  const int shares = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(n_workers, blocks)));
  if (shares == 1) return fn(0, n);
  struct alignas(64) Share {  // one cache line each: its owner's claims do not contend with the others'
    std::atomic<int64_t> next;
    int64_t end;
  };
  std::vector<Share> share(static_cast<size_t>(shares));
  for (int s = 0; s < shares; ++s) {
    share[s].next.store(blocks * s / shares, std::memory_order_relaxed);
    share[s].end = blocks * (s + 1) / shares;
  }
  pool.run_on_workers(shares, [&](int w, int nw) {
    for (int v = 0; v < nw; ++v) {  // its own share first, then the following ones
      Share& s = share[static_cast<size_t>((w + v) % nw)];
      // Relaxed: each block goes to exactly one fetch_add; the pool's join publishes the writes to y.
      for (int64_t b; (b = s.next.fetch_add(1, std::memory_order_relaxed)) < s.end;)
        fn(b * 64, std::min(n, (b + 1) * 64));
    }
  });
}

}  // namespace lathe::cpu
