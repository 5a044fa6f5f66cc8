// Worker threads for data-parallel loops. One pool lives in each Context (no global pool, STYLE §13):
// parallel_for hands every task its worker number so kernels can use per-worker scratch without
// thread_local. Implemented on OpenMP, whose spinning team is cheaper per loop than a condition variable.
#pragma once

#include <cstddef>
#include <cstdint>

#include <omp.h>

namespace lathe {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads = 0);  // 0: all hardware threads
  int n_threads() const { return n_threads_; }

  // Runs fn(task, worker) for task in [0, n_tasks); tasks are split statically into contiguous ranges,
  // one per worker, so neighbouring tasks share a worker's cache. Runs inline when n_tasks == 1.
  template <class Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) const;

  // Runs fn(worker, n_workers) once on each of min(n_threads, max_workers) workers.
  template <class Fn>
  void run_on_workers(int max_workers, Fn&& fn) const;

 private:
  int n_threads_;
};

template <class Fn>
void ThreadPool::parallel_for(int64_t n_tasks, Fn&& fn) const {
  if (n_tasks <= 0) return;
  const int n = n_tasks < n_threads_ ? static_cast<int>(n_tasks) : n_threads_;
  if (n <= 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
#pragma omp parallel num_threads(n)
  {
    const int w = omp_get_thread_num();
    const int64_t begin = n_tasks * w / n, end = n_tasks * (w + 1) / n;
    for (int64_t t = begin; t < end; ++t) fn(t, w);
  }
}

template <class Fn>
void ThreadPool::run_on_workers(int max_workers, Fn&& fn) const {
  const int n = max_workers < n_threads_ ? max_workers : n_threads_;
  if (n <= 1) {
    fn(0, 1);
    return;
  }
#pragma omp parallel num_threads(n)
  {
    fn(omp_get_thread_num(), n);
  }
}

}  // namespace lathe
