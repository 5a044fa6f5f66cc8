// The fp32 FMA peak probe shared by bench/peak_fma.cc (stand-alone: needs nothing from lathe) and
// bench/gemm_bench.cc. 16 independent accumulators, kept in registers (no asm barrier, which would force
// them to memory): 4-cycle FMA latency x 2 FMA ports needs >= 8 in flight; 16 also hides any scheduling
// slack. Each iteration is 16 FMAs x 16 lanes x 2 flops = kFmaFlopsPerIter.
#pragma once

#include <immintrin.h>

#include <cstdint>

constexpr int kFmaAccumulators = 16;
constexpr double kFmaFlopsPerIter = 2.0 * 16 * kFmaAccumulators;

__attribute__((target("avx512f,fma"))) inline float fma_loop(int64_t iters, float seed) {
  __m512 acc[kFmaAccumulators];
  for (int i = 0; i < kFmaAccumulators; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kFmaAccumulators; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kFmaAccumulators; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
