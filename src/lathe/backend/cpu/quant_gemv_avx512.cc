// AVX-512 quantised decode GEMV: y[i, j] = x_i · deq(W row j) for m <= 16 rows of x. One step is one unit
// of 32 inputs: its codes (32 bytes of int8, or 16 bytes of int4 nibbles: low nibbles inputs 0-15, high
// ones 16-31; int6 ORs in its 8 bytes of high bits, quant_unit_codes.h) widen to two f32 vectors and take the
// group's scale in registers (int8 d·q; int4 d·(q - 8); int6 d·(q - 32); int4-asym fma(q, d, m)), then
// meet x with one FMA per vector and row of x.
//  - a tile is up to 4 rows of x against 4 rows of W: x's two vectors per row stay in registers for the 4
//    W rows, 16 accumulators;
//  - m <= 4: one pass over W (each code read once from memory); m > 4: a block of kJb W rows (16-64 KiB of
//    codes at K = 2048-4096 in int4/int8, in L2) is run against each group of 4 x rows in turn, so W still
//    comes from DRAM once.
// Each output is one 16-lane accumulator summed over the units in increasing k, then reduced: the result
// does not depend on m, on the tile nor on [j0, j1).
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/avx512_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_unit_codes.h"
#include "lathe/backend/cpu/quant_gemm.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;     // W rows per tile
constexpr int kXRows = 4;    // x rows per tile
constexpr int64_t kJb = 16;  // W rows per block when m > 4

// Unit u of W row `codes` (k inputs) with its group's scale d (and, int4-asym, minimum b) -> two f32 vectors
// of inputs [32u, 32u + 16) and [32u + 16, 32u + 32). int4's q - 8 (int6's q - 32) is taken on the bytes, so
// int8, int4 and int6 all dequantise as d·q (exact in f32: an 11-bit scale times a code of at most 8 bits).
template <QuantFormat F>
LATHE_AVX512 inline void dequantize_unit(const uint8_t* codes, int64_t k, int64_t u, __m512 d, __m512 b, __m512& w0,
                                         __m512& w1) {
  if constexpr (F == QuantFormat::kInt8) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + u * 32));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), d);
  } else {
    __m128i lo, hi;
    unit_code_halves<F, /*centred=*/true>(codes, k, u, lo, hi);
    if constexpr (F == QuantFormat::kInt4 || F == QuantFormat::kInt6) {
      w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)), d);
      w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)), d);
    } else {
      w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), d, b);
      w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), d, b);
    }
  }
}

// Rows [j, j + R) of W against rows 0..MB of x (x, y already at the tile's first row). The scales (and
// mins) of 16 groups at a time are widened in one vcvtph2ps per row into a small table, from which each
// group's value is broadcast: no scalar conversion and no division in the unit loop.
template <QuantFormat F, int MB, int R>
LATHE_AVX512 void tile(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                       bool accumulate) {
  constexpr bool kMins = F == QuantFormat::kInt4Asym;
  const int64_t k = w.k, group_units = w.spec.group / 32, groups = k / w.spec.group;
  const int64_t row_bytes = quant_row_bytes(F, k);
  __m512 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  alignas(64) float ds[R][16], ms[R][16];
  prefetch_next_scales(w, j + R, R, groups);
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    const __mmask16 mask = static_cast<__mmask16>((1u << std::min<int64_t>(16, groups - g0)) - 1);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int64_t at = (j + r) * groups + g0;
      _mm512_store_ps(ds[r], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, w.scales + at)));
      if constexpr (kMins) _mm512_store_ps(ms[r], _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, w.mins + at)));
    }
    for (int64_t g = g0; g < std::min(groups, g0 + 16); ++g) {
      __m512 d[R], b[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        d[r] = _mm512_set1_ps(ds[r][g - g0]);
        b[r] = kMins ? _mm512_set1_ps(ms[r][g - g0]) : d[r];
      }
      for (int64_t u = g * group_units; u < (g + 1) * group_units; ++u) {
        __m512 x0[MB], x1[MB];
#pragma GCC unroll 4
        for (int i = 0; i < MB; ++i) {
          x0[i] = _mm512_loadu_ps(x + i * ldx + u * 32);
          x1[i] = _mm512_loadu_ps(x + i * ldx + u * 32 + 16);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          // The same codes kGemvPrefetchTiles tiles on, into L2, as quant_gemv_avx512_vnni.cc.
          _mm_prefetch(reinterpret_cast<const char*>(w.codes + (j + kGemvPrefetchTiles * R + r) * row_bytes +
                                                     u * (row_bytes / (k / 32))),
                       _MM_HINT_T1);
          __m512 w0, w1;
          dequantize_unit<F>(w.codes + (j + r) * row_bytes, k, u, d[r], b[r], w0, w1);
#pragma GCC unroll 4
          for (int i = 0; i < MB; ++i) acc[i][r] = _mm512_fmadd_ps(x1[i], w1, _mm512_fmadd_ps(x0[i], w0, acc[i][r]));
        }
      }
    }
  }
  avx512::store_tile_sums(acc, y, ldy, j, accumulate);
}

template <QuantFormat F, int MB>
LATHE_AVX512 void rows(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y, int64_t ldy,
                       bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(x, ldx, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<F, MB, 1>(x, ldx, w, j, y, ldy, accumulate);
}

template <QuantFormat F>
LATHE_AVX512 void gemv(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      const float* xi = x + i0 * ldx;
      float* yi = y + i0 * ldy;
      switch (std::min(kXRows, m - i0)) {
        case 1:
          rows<F, 1>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        case 2:
          rows<F, 2>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        case 3:
          rows<F, 3>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        default:
          rows<F, 4>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
      }
    }
  }
}

}  // namespace

void quant_gemv_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return gemv<QuantFormat::kInt8>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt4:
      return gemv<QuantFormat::kInt4>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt6:
      return gemv<QuantFormat::kInt6>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
    default:
      return gemv<QuantFormat::kInt4Asym>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
  }
}

}  // namespace lathe::cpu
