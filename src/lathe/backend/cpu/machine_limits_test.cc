// The machine-limit probes: each runs exactly where the CPU has its ISA (a probe run elsewhere would die
// with SIGILL, failing the test binary) and returns 0 where it lacks it; bandwidths are positive.
#include "lathe/backend/cpu/machine_limits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "lathe/backend/cpu/peak_flops.h"

namespace lathe::cpu {
namespace {

constexpr double kSeconds = 0.01;  // one or two rounds: the value only needs to be positive

TEST(MachineLimits, EachProbeRunsWhereTheCpuHasItsIsaAndIsZeroElsewhere) {
  const ThreadPool pool(2);
  const CpuFeatures cpu = CpuFeatures::detect();
  for (int i = 0; i < static_cast<int>(ComputePeak::kCount); ++i) {
    const auto p = static_cast<ComputePeak>(i);
    const double g = measure_compute_peak(p, pool, 2, kSeconds, cpu);
    if (compute_peak_supported(p, cpu)) {
      EXPECT_GT(g, 0.0) << compute_peak_info(p).name;
    } else {
      EXPECT_EQ(g, 0.0) << compute_peak_info(p).name << " is absent on this CPU";
    }
  }
}

TEST(MachineLimits, AClearedFeatureSkipsItsProbe) {
  // What an AVX2-only CPU (Zen 3) looks like to the probes, on any machine: nothing AVX-512 runs.
  const ThreadPool pool(1);
  CpuFeatures avx2_only = CpuFeatures::detect();
  avx2_only.avx512f = avx2_only.avx512_bf16 = avx2_only.avx512_vnni = false;
  EXPECT_EQ(measure_compute_peak(ComputePeak::kFp32FmaAvx512, pool, 1, kSeconds, avx2_only), 0.0);
  EXPECT_EQ(measure_compute_peak(ComputePeak::kBf16DotAvx512, pool, 1, kSeconds, avx2_only), 0.0);
  EXPECT_EQ(measure_compute_peak(ComputePeak::kInt8DotAvx512Vnni, pool, 1, kSeconds, avx2_only), 0.0);
  if (avx2_only.avx2_fma) {
    EXPECT_GT(measure_compute_peak(ComputePeak::kFp32FmaAvx2, pool, 1, kSeconds, avx2_only), 0.0);
  }
  const CpuFeatures none;
  for (int i = 0; i < static_cast<int>(ComputePeak::kCount); ++i)
    EXPECT_EQ(measure_compute_peak(static_cast<ComputePeak>(i), pool, 1, kSeconds, none), 0.0);
}

TEST(MachineLimits, FeatureFlagsAreConsistent) {
  const CpuFeatures cpu = CpuFeatures::detect();
  EXPECT_TRUE(cpu.avx512f || !(cpu.avx512_bf16 || cpu.avx512_vnni));
  EXPECT_TRUE(cpu.avx2_fma || !cpu.avx_vnni);
}

TEST(MachineLimits, FmaPeakForMfuIsPositive) {
  const ThreadPool pool(1);
  EXPECT_GT(measure_fma_peak_gflops(pool, kSeconds), 0.0);
}

// MFU's denominator on a busy host (the bug: pre-training read MFU ~400% after a probe run under load). Two
// spinning threads per core halve what each probe worker gets of the wall clock, not of its own CPU time.
TEST(MachineLimits, FmaPeakForMfuHoldsWhileTheHostIsBusy) {
  const ThreadPool pool(2);
  const double quiet = measure_fma_peak_gflops(pool, 0.1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < 2 * std::max(1u, std::thread::hardware_concurrency()); ++i)
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const double busy = measure_fma_peak_gflops(pool, 0.1);
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_GE(busy, 0.7 * quiet) << "busy-host peak " << busy << " GFLOP/s against " << quiet << " when quiet";
}

TEST(MachineLimits, BandwidthProbesArePositiveOnEveryWorkerCount) {
  const ThreadPool pool(2);
  BandwidthProbe probe(size_t{8} << 20, pool);  // small: this checks the arithmetic, not DRAM
  EXPECT_EQ(probe.read_bytes(), size_t{8} << 20);
  for (int n : {1, 2}) {
    EXPECT_GT(probe.read_gbps(pool, n, 2), 0.0) << n;
    EXPECT_GT(probe.triad_gbps(pool, n, 2), 0.0) << n;
  }
}

TEST(MachineLimits, StreamSizeOutgrowsTheCache) {
  EXPECT_EQ(stream_bytes_for_cache(size_t{48} << 20), size_t{384} << 20);
  EXPECT_EQ(stream_bytes_for_cache(size_t{1} << 20), size_t{256} << 20);   // floor
  EXPECT_EQ(stream_bytes_for_cache(size_t{512} << 20), size_t{1} << 30);  // ceiling
  EXPECT_GT(last_level_cache_bytes(), size_t{0});
}

}  // namespace
}  // namespace lathe::cpu
