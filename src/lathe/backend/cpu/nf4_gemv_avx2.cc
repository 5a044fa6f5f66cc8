// AVX2 NF4 decode GEMV (compiled without AVX-512, like the tier's other kernels): as nf4_gemv_avx512.cc with 8-lane
// vectors. The 16-entry code table is two registers: each 8-index vector is looked up in both (vpermps uses the low 3
// bits) and the half chosen by index bit 3 (moved to the sign bit for vblendvps). A tile is up to 2 rows of x against 4
// rows of W (8 accumulators); m > 2 runs blocks of kJb W rows against each pair of x rows in turn. Each output is one
// 8-lane accumulator summed in increasing k, then reduced in a fixed order.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/nf4.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 2;
constexpr int64_t kJb = 16;

// nf4[idx] for 8 indices in [0, 15].
LATHE_AVX2 inline __m256 lookup(__m256i idx, __m256 lo, __m256 hi) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                          _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// 32 inputs from 16 bytes of codes -> four f32 vectors of 8 inputs in order, times the block's absmax.
LATHE_AVX2 inline void dequantize_unit(const uint8_t *c, __m256 lo, __m256 hi, __m256 amax, __m256 (&wv)[4]) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(c));
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i even = _mm_and_si128(_mm_srli_epi16(q, 4), low), odd = _mm_and_si128(q, low);
  const __m128i e0 = _mm_unpacklo_epi8(even, odd), e1 = _mm_unpackhi_epi8(even, odd);
  wv[0] = _mm256_mul_ps(lookup(_mm256_cvtepu8_epi32(e0), lo, hi), amax);
  wv[1] = _mm256_mul_ps(lookup(_mm256_cvtepu8_epi32(_mm_srli_si128(e0, 8)), lo, hi), amax);
  wv[2] = _mm256_mul_ps(lookup(_mm256_cvtepu8_epi32(e1), lo, hi), amax);
  wv[3] = _mm256_mul_ps(lookup(_mm256_cvtepu8_epi32(_mm_srli_si128(e1, 8)), lo, hi), amax);
}

template <int MB, int R>
LATHE_AVX2 void tile(const float *x, int64_t ldx, const QuantMatrix &w, int64_t j, float *y, int64_t ldy,
                     bool accumulate) {
  const int64_t k = w.k, bs = w.spec.group, blocks_per_row = k / bs, row_bytes = k / 2;
  const __m256 lo = _mm256_loadu_ps(ref::kNf4Code), hi = _mm256_loadu_ps(ref::kNf4Code + 8);
  __m256 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < blocks_per_row; ++g) {
    __m256 amax[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) amax[r] = _mm256_set1_ps(w.absmax[(j + r) * blocks_per_row + g]);
    for (int64_t u = g * bs / 32; u < (g + 1) * bs / 32; ++u) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256 wv[4];
        dequantize_unit(w.codes + (j + r) * row_bytes + u * 16, lo, hi, amax[r], wv);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v)
#pragma GCC unroll 4
          for (int i = 0; i < MB; ++i)
            acc[i][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + u * 32 + v * 8), wv[v], acc[i][r]);
      }
    }
  }
  avx2::store_tile_sums(acc, y, ldy, j, accumulate);
}

template <int MB>
LATHE_AVX2 void rows(const float *x, int64_t ldx, const QuantMatrix &w, int64_t j0, int64_t j1, float *y, int64_t ldy,
                     bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<MB, kRows>(x, ldx, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<MB, 1>(x, ldx, w, j, y, ldy, accumulate);
}

}  // namespace

void nf4_gemv_avx2(int m, const float *x, int64_t ldx, const QuantMatrix &w, int64_t j0, int64_t j1, float *y,
                   int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      if (m - i0 == 1)
        rows<1>(x + i0 * ldx, ldx, w, jb, je, y + i0 * ldy, ldy, accumulate);
      else
        rows<2>(x + i0 * ldx, ldx, w, jb, je, y + i0 * ldy, ldy, accumulate);
    }
  }
}

}  // namespace lathe::cpu
