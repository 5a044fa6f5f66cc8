#include "lathe/backend/cpu/peak_flops.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "lathe/backend/cpu/cpu_tier.h"
#include "lathe/backend/cpu/machine_limits.h"

namespace lathe::cpu {

namespace {

// The fallback for CPUs without AVX2 + FMA: 8-float vectors in whatever the build targets (two SSE
// registers without -march), which GCC turns into multiply-adds.
typedef float Vec __attribute__((vector_size(32)));
constexpr int kLanes = 8;

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

double portable_peak_gflops(const ThreadPool& pool, double seconds) {
  using Clock = std::chrono::steady_clock;
  const int n = pool.n_threads();
  constexpr int64_t kIters = 100000;
  std::atomic<float> sink{0};
  double best = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    Clock::time_point t0, t1;
    pool.run_on_workers(n, [&](int w, int nw) {
      if (nw > 1) pool.barrier();
      if (w == 0) t0 = Clock::now();
      sink.store(fma_chains(kIters, 1e-3f * static_cast<float>(w + 1)), std::memory_order_relaxed);
      if (nw > 1) pool.barrier();
      if (w == 0) t1 = Clock::now();
    });
    const double dt = std::chrono::duration<double>(t1 - t0).count();
    best = std::max(best, 2.0 * 12 * kLanes * kIters * n / dt);
  } while (Clock::now() < end);
  return best / 1e9;
}

}  // namespace

// The peak of the tier the kernels run (LATHE_CPU=avx2 on an AVX-512 CPU is measured against AVX2's).
double measure_fma_peak_gflops(const ThreadPool& pool, double seconds) {
  const CpuFeatures cpu = CpuFeatures::detect();
  const CpuTier tier = cpu_tier();
  if (cpu.avx512f && tier >= CpuTier::kAvx512) return measure_compute_peak(ComputePeak::kFp32FmaAvx512, pool, pool.n_threads(), seconds, cpu);
  if (cpu.avx2_fma && tier >= CpuTier::kAvx2) return measure_compute_peak(ComputePeak::kFp32FmaAvx2, pool, pool.n_threads(), seconds, cpu);
  return portable_peak_gflops(pool, seconds);
}

}  // namespace lathe::cpu
