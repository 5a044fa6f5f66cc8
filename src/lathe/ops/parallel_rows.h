// Row-parallel loop shared by the element-wise and row-wise op kernels: small inputs run inline (a
// thread wake-up costs more than ~64K elements of streaming work), large ones split the rows into one
// contiguous range per worker of the current context's pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "lathe/base/context.h"

namespace lathe {

inline constexpr int64_t kParallelMinElems = 1 << 16;

// Number of row ranges parallel_rows will use for n_rows rows of row_elems elements each (>= 1); lets
// a caller size per-range scratch (e.g. partial weight gradients) before the loop.
inline int64_t parallel_rows_tasks(int64_t n_rows, int64_t row_elems) {
  if (n_rows < 2 || n_rows * row_elems < kParallelMinElems) return 1;
  return std::min<int64_t>(n_rows, current_context().pool.n_threads());
}

// Calls fn(task, row_begin, row_end) for parallel_rows_tasks(...) disjoint ranges covering [0, n_rows).
template <class Fn>
void parallel_rows(int64_t n_rows, int64_t row_elems, Fn&& fn) {
  const int64_t n_tasks = parallel_rows_tasks(n_rows, row_elems);
  if (n_tasks == 1) {
    fn(int64_t{0}, int64_t{0}, n_rows);
    return;
  }
  current_context().pool.parallel_for(n_tasks, [&](int64_t t, int /*worker*/) {
    fn(t, n_rows * t / n_tasks, n_rows * (t + 1) / n_tasks);
  });
}

}  // namespace lathe
