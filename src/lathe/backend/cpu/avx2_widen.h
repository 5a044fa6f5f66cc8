// Element loads, the lane sum and a GEMV tile's store shared by the AVX2 tier's kernels (GEMM, GEMVs, quantised GEMVs): 8 consecutive f32, bf16
// or f16 values as one f32 vector (bf16 is the top half of an f32: widen by a 16-bit shift; f16 by F16C's
// vcvtph2ps, exact for every f16 value, subnormals included), and the scalar widening for tails. Only for
// files compiled for the AVX2 tier (see CMakeLists.txt).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu::avx2 {

LATHE_AVX2 inline __m256 load_f32x8(const float* s) { return _mm256_loadu_ps(s); }
LATHE_AVX2 inline __m256 load_f32x8(const bf16* s) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
LATHE_AVX2 inline __m256 load_f32x8(const f16* s) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
}
// The sum of a vector's 8 lanes, in a fixed order ((l + h) pairs, then halves), so a kernel's reduction
// does not depend on how it was called.
LATHE_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// A GEMV tile's outputs: y[i][j + r] = (y[i][j + r] if accumulate) + the lane sum of acc[i][r], for the
// tile's MB rows of x by R rows of W.
template <int MB, int R>
LATHE_AVX2 inline void store_tile_sums(const __m256 (&acc)[MB][R], float* y, int64_t ldy, int64_t j, bool accumulate) {
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float v = hsum(acc[i][r]);
      float& out = y[i * ldy + j + r];
      out = accumulate ? out + v : v;
    }
}

inline float widen(float v) { return v; }
inline float widen(bf16 v) { return bf16_to_f32(v); }
LATHE_AVX2 inline float widen(f16 v) { return _cvtsh_ss(v.bits); }

}  // namespace lathe::cpu::avx2
