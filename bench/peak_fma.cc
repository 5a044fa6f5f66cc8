// Measures this machine's peak AVX-512 throughput: fp32 FMA (vfmadd231ps) and bf16 dot (vdpbf16ps), at
// 1 and 2 threads, and prints one JSON line. The GEMM benchmark report divides by these to get % of peak.
// Standalone (no lathe deps): g++ -O2 -march=native -fopenmp bench/peak_fma.cc -o peak_fma
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

#include "fma_loop.h"

namespace {

// Same accumulator count as fma_loop (fma_loop.h).
constexpr int kAcc = kFmaAccumulators;
constexpr long kIters = 20'000'000;

// vdpbf16ps: 16 lanes x 2 products x 2 flops per instruction.
__attribute__((target("avx512f,avx512bf16"))) float dot_loop(long iters, float seed) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x33d633d6);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// Best of 5 runs of fn on n_threads threads, in GFLOP/s (flops_per_iter counts all threads' work).
template <class Fn>
double measure(int n_threads, double flops_per_iter, Fn fn) {
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(n_threads)
    { sink = sink + fn(kIters, static_cast<float>(omp_get_thread_num())); }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double g = flops_per_iter * kIters * n_threads / s / 1e9;
    if (g > best) best = g;
  }
  return best;
}

}  // namespace

int main() {
  __builtin_cpu_init();
  const bool has_bf16 = __builtin_cpu_supports("avx512bf16");
  const double fma_flops = kFmaFlopsPerIter, dot_flops = kAcc * 16 * 4;
  const double f1 = measure(1, fma_flops, fma_loop), f2 = measure(2, fma_flops, fma_loop);
  double d1 = 0, d2 = 0;
  if (has_bf16) {
    d1 = measure(1, dot_flops, dot_loop);
    d2 = measure(2, dot_flops, dot_loop);
  }
  std::printf(
      "{\"fp32_fma_gflops_1t\": %.1f, \"fp32_fma_gflops_2t\": %.1f, \"bf16_dot_gflops_1t\": %.1f, "
      "\"bf16_dot_gflops_2t\": %.1f}\n",
      f1, f2, d1, d2);
}
