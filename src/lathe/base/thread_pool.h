// Worker threads for data-parallel loops. One pool lives in each Context (no global pool, STYLE §13):
// parallel_for hands every task its worker number so kernels can use per-worker scratch without
// thread_local. The caller is worker 0 and helpers are persistent threads. Waiting is a short spin
// (~0.1 ms) followed by sleeping (helpers) or yielding (caller, barriers): on a quiet machine the
// next loop starts without a wake-up, and on a shared host a spinning thread never holds the core a
// descheduled sibling needs (with OpenMP's 300k-spin default, 2-thread runs were 2-3x slower there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace lathe {

// The most threads a pool takes (helpers are persistent: a typo of 10^6 must not try to start them).
inline constexpr int kMaxThreadCount = 4096;

class ThreadPool {
 public:
  // n_threads in [0, kMaxThreadCount]; 0: all hardware threads. Throws InvalidArgument outside that
  // range, and Error (naming n_threads) when the system cannot start that many threads; the helpers
  // started so far are stopped and joined first.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int n_threads() const { return n_threads_; }

  // Runs fn(task, worker) for task in [0, n_tasks); tasks are split statically into contiguous ranges,
  // one per worker, so neighbouring tasks share a worker's cache. Runs inline when n_tasks == 1.
  template <class Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) const;

  // Runs fn(worker, n_workers) once on each of min(n_threads, max_workers) workers.
  template <class Fn>
  void run_on_workers(int max_workers, Fn&& fn) const;

  // Inside run_on_workers: waits until every worker of the current call has arrived.
  void barrier() const;

 private:
  using Trampoline = void (*)(void* fn, int worker, int n_workers);
  void run(int n_workers, Trampoline call, void* fn) const;
  void stop_helpers();  // sets stop, wakes and joins every helper
  struct State;
  int n_threads_;
  std::unique_ptr<State> state_;
};

template <class Fn>
void ThreadPool::run_on_workers(int max_workers, Fn&& fn) const {
  const int n = max_workers < n_threads_ ? max_workers : n_threads_;
  if (n <= 1) {
    fn(0, 1);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  run(n, [](void* f, int w, int nw) { (*static_cast<F*>(f))(w, nw); }, const_cast<void*>(static_cast<const void*>(&fn)));
}

template <class Fn>
void ThreadPool::parallel_for(int64_t n_tasks, Fn&& fn) const {
  if (n_tasks <= 0) return;
  const int n = n_tasks < n_threads_ ? static_cast<int>(n_tasks) : n_threads_;
  if (n <= 1) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
    return;
  }
  run_on_workers(n, [&](int w, int nw) {
    const int64_t begin = n_tasks * w / nw, end = n_tasks * (w + 1) / nw;
    for (int64_t t = begin; t < end; ++t) fn(t, w);
  });
}

}  // namespace lathe
