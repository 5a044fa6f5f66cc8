#include "lathe/backend/cpu/peak_flops.h"

#include <atomic>
#include <chrono>

namespace lathe::cpu {

namespace {

// The widest vector the build targets (-march=native: 16 floats with AVX-512); GCC emits FMAs for a*b+c.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// 12 independent accumulators cover the FMA latency x throughput product of current cores.
float fma_chains(int64_t iters, float seed) {
  Vec acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = Vec{} + seed * static_cast<float>(i + 1);
  const Vec a = Vec{} + 0.999999f, b = Vec{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * a + b;
  float sum = 0;
  for (int i = 0; i < 12; ++i)
    for (int l = 0; l < kLanes; ++l) sum += acc[i][l];
  return sum;
}

}  // namespace

double measure_fma_peak_gflops(const ThreadPool& pool, double seconds) {
  using Clock = std::chrono::steady_clock;
  const int n = pool.n_threads();
  constexpr int64_t kIters = 100000;  // ~19 MFLOP per worker per round
  std::atomic<float> sink{0};
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  // All workers run the same amount of work between two barriers; the round's wall time counts. (Timing
  // each worker alone would overstate the peak where two vCPUs share a core.)
  while (Clock::now() < end) {
    Clock::time_point t0, t1;
    pool.run_on_workers(n, [&](int w, int) {
      pool.barrier();
      if (w == 0) t0 = Clock::now();
      sink.store(fma_chains(kIters, 1e-3f * static_cast<float>(w + 1)), std::memory_order_relaxed);
      pool.barrier();
      if (w == 0) t1 = Clock::now();
    });
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    best = std::max(best, 2.0 * 12 * kLanes * kIters * n / dt);
  }
  return best / 1e9;
}

}  // namespace lathe::cpu
