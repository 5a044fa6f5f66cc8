// Element loads shared by the AVX2 tier's kernels (gemm_avx2.cc, gemv_avx2.cc): 8 consecutive f32 or
// bf16 values as one f32 vector (bf16 is the top half of an f32: widen by a 16-bit shift), and the
// scalar widening for tails. Only for files compiled for the AVX2 tier (see CMakeLists.txt).
#pragma once

#include <immintrin.h>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu::avx2 {

LATHE_AVX2 inline __m256 load_f32x8(const float* s) { return _mm256_loadu_ps(s); }
LATHE_AVX2 inline __m256 load_f32x8(const bf16* s) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline float widen(float v) { return v; }
inline float widen(bf16 v) { return bf16_to_f32(v); }

}  // namespace lathe::cpu::avx2
