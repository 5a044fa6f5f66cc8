#include "lathe/base/thread_pool.h"

#include <immintrin.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "lathe/base/context.h"
#include "lathe/base/error.h"

namespace lathe {
namespace {
constexpr int kSpinIterations = 2000;  // x ~50 ns per pause: ~0.1 ms before sleeping or yielding

thread_local const ThreadPool* tls_running_pool = nullptr;  // nested calls on the same pool run inline
}  // namespace

struct ThreadPool::State {
  std::vector<std::thread> helpers;
  std::mutex run_mu;  // one job at a time per pool (a pool may be shared by several caller threads)
  // The current job, published by `epoch` (release) and read after observing it (acquire).
  Trampoline call = nullptr;
  void* fn = nullptr;
  int n_workers = 0;
  Context* context = nullptr;  // the submitting thread's scoped context, installed on the helpers
  std::atomic<uint64_t> epoch{0};
  std::atomic<int> pending{0};  // helpers that have not finished the current epoch
  std::atomic<bool> stop{false};
  // Sleeping helpers wait here; the caller notifies only when someone sleeps.
  std::mutex sleep_mu;
  std::condition_variable wake;
  std::atomic<int> n_sleeping{0};
  // Barrier among the workers of the current job.
  std::atomic<int> barrier_count{0};
  std::atomic<uint64_t> barrier_generation{0};

  void helper_loop(int worker, const ThreadPool* pool) {
    uint64_t seen = 0;
    while (true) {
      int spins = 0;
      while (epoch.load(std::memory_order_acquire) == seen && !stop.load(std::memory_order_relaxed)) {
        if (++spins < kSpinIterations) {
          _mm_pause();
          continue;
        }
        std::unique_lock<std::mutex> lk(sleep_mu);
        n_sleeping.fetch_add(1);
        wake.wait(lk, [&] { return epoch.load() != seen || stop.load(); });
        n_sleeping.fetch_sub(1);
      }
      if (stop.load()) return;
      seen = epoch.load(std::memory_order_acquire);
      if (worker < n_workers) {
        const ContextScope scope(context);
        tls_running_pool = pool;
        call(fn, worker, n_workers);
        tls_running_pool = nullptr;
      }
      pending.fetch_sub(1, std::memory_order_release);
    }
  }
};

ThreadPool::ThreadPool(int n_threads) : state_(std::make_unique<State>()) {
  LATHE_CHECK_ARG(n_threads >= 0 && n_threads <= kMaxThreadCount, "[ThreadPool] thread count ", n_threads,
                  " is out of range (accepted: 1 to ", kMaxThreadCount, ", or 0 for all hardware threads)");
  if (n_threads == 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = n_threads > 0 ? n_threads : 1;
  state_->helpers.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int w = 1; w < n_threads_; ++w) {
    try {
      state_->helpers.emplace_back([this, w] { state_->helper_loop(w, this); });
    } catch (const std::system_error& e) {
      // Out of threads or of address space for their stacks (ulimit -v / -u): a joinable std::thread
      // left in `helpers` would call std::terminate, so stop the ones already running first.
      stop_helpers();
      throw Error(str_cat("[ThreadPool] cannot start ", n_threads_, " threads: thread ", w + 1, " failed (", e.what(),
                          "); ask for fewer threads"));
    }
  }
}

void ThreadPool::stop_helpers() {
  {
    std::lock_guard<std::mutex> lk(state_->sleep_mu);
    state_->stop.store(true);
  }
  state_->wake.notify_all();
  for (std::thread& t : state_->helpers) t.join();
  state_->helpers.clear();
}

ThreadPool::~ThreadPool() { stop_helpers(); }

void ThreadPool::run(int n_workers, Trampoline call, void* fn) const {
  State& s = *state_;
  if (tls_running_pool == this) {  // called from inside one of this pool's jobs: no helpers left
    for (int w = 0; w < n_workers; ++w) call(fn, w, n_workers);
    return;
  }
  std::lock_guard<std::mutex> job_lock(s.run_mu);
  s.call = call;
  s.fn = fn;
  s.n_workers = n_workers;
  s.context = scoped_context();
  s.barrier_count.store(0, std::memory_order_relaxed);
  s.pending.store(static_cast<int>(s.helpers.size()), std::memory_order_relaxed);
  s.epoch.fetch_add(1);  // seq_cst: pairs with the helpers' n_sleeping increment (no lost wake-up)
  if (s.n_sleeping.load() > 0) {
    { std::lock_guard<std::mutex> lk(s.sleep_mu); }
    s.wake.notify_all();
  }
  tls_running_pool = this;
  call(fn, 0, n_workers);
  tls_running_pool = nullptr;
  for (int spins = 0; s.pending.load(std::memory_order_acquire) > 0; ++spins) {
    if (spins < kSpinIterations)
      _mm_pause();
    else
      std::this_thread::yield();  // a helper may be waiting for this core
  }
}

void ThreadPool::barrier() const {
  State& s = *state_;
  const int n = s.n_workers;
  if (n <= 1) return;
  const uint64_t gen = s.barrier_generation.load(std::memory_order_acquire);
  if (s.barrier_count.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
    s.barrier_count.store(0, std::memory_order_relaxed);
    s.barrier_generation.fetch_add(1, std::memory_order_release);
    return;
  }
  for (int spins = 0; s.barrier_generation.load(std::memory_order_acquire) == gen; ++spins) {
    if (spins < kSpinIterations)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

}  // namespace lathe
