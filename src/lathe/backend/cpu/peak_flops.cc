#include "lathe/backend/cpu/peak_flops.h"


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

}  // namespace

// Timed on the workers' CPU time, so that a host busy during the probe does not shrink the peak.
constexpr RoundClock kClock = RoundClock::kWorkerCpu;

// The peak of the tier the kernels run (LATHE_CPU=avx2 on an AVX-512 CPU is measured against AVX2's).
double measure_fma_peak_gflops(const ThreadPool& pool, double seconds) {
  const CpuFeatures cpu = CpuFeatures::detect();
  const CpuTier tier = cpu_tier();
  if (cpu.avx512f && tier >= CpuTier::kAvx512) return measure_compute_peak(ComputePeak::kFp32FmaAvx512, pool, pool.n_threads(), seconds, cpu, kClock);
  if (cpu.avx2_fma && tier >= CpuTier::kAvx2) return measure_compute_peak(ComputePeak::kFp32FmaAvx2, pool, pool.n_threads(), seconds, cpu, kClock);
  return best_round_rate(pool, pool.n_threads(), seconds, 100000, 2.0 * 12 * kLanes, fma_chains, kClock);
}

}  // namespace lathe::cpu
