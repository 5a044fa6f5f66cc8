// Element loads and a GEMV tile's store shared by the AVX-512 tier's kernels (gemm_avx512.cc's packer,
// gemv_avx512.cc's "nn" kernel, the quantised and NF4 GEMVs): up to 16 consecutive f32, bf16 or f16 values
// (the lanes of mask, the others zero) as one f32 vector. bf16 is the top half of an f32 (widen by a 16-bit
// shift); f16 widens with vcvtph2ps, exact for every f16 value, subnormals included. A lane outside the mask
// is never read, so it may lie past the array.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu::avx512 {

LATHE_AVX512 inline __m512 load_f32x16(const float* s, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, s); }
LATHE_AVX512 inline __m512 load_f32x16(const bf16* s, __mmask16 mask) {
  const __m256i h = _mm256_maskz_loadu_epi16(mask, s);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
LATHE_AVX512 inline __m512 load_f32x16(const f16* s, __mmask16 mask) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, s));
}

// A GEMV tile's outputs: y[i][j + r] = (y[i][j + r] if accumulate) + the lane sum of acc[i][r], for the
// tile's MB rows of x by R rows of W (avx2::store_tile_sums on 16 lanes).
template <int MB, int R>
LATHE_AVX512 inline void store_tile_sums(const __m512 (&acc)[MB][R], float* y, int64_t ldy, int64_t j,
                                         bool accumulate) {
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float v = _mm512_reduce_add_ps(acc[i][r]);
      float& out = y[i * ldy + j + r];
      out = accumulate ? out + v : v;
    }
}

}  // namespace lathe::cpu::avx512
