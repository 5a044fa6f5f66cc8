// AVX2 quantised decode GEMV (compiled without AVX-512, like the tier's other kernels): as the AVX-512
// one (quant_gemv_avx512.cc) with 8-lane vectors: a unit of 32 inputs widens to four f32 vectors, each
// scaled by its group in registers and met by the x rows of the tile (up to 2 rows of x against 4 rows of W:
// 8 accumulators in the 16 ymm registers; x is read from L1 as an FMA operand). m > 2: blocks of kJb W rows
// are run against each pair of x rows in turn, so W comes from DRAM once.
// Each output is one 8-lane accumulator summed in increasing k, then reduced in a fixed order.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_unit_codes.h"
#include "lathe/backend/cpu/quant_gemm.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 2;
constexpr int64_t kJb = 16;

// The four 8-input integer vectors of unit u of a W row of k inputs: inputs [32u + 8v, 32u + 8v + 8) in q[v].
template <QuantFormat F>
LATHE_AVX2 inline void unit_codes(const uint8_t* codes, int64_t k, int64_t u, __m256i (&q)[4]) {
  if constexpr (F == QuantFormat::kInt8) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + u * 32));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + u * 32 + 16));
    q[0] = _mm256_cvtepi8_epi32(a);
    q[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(a, 8));
    q[2] = _mm256_cvtepi8_epi32(b);
    q[3] = _mm256_cvtepi8_epi32(_mm_srli_si128(b, 8));
  } else {  // low nibbles: inputs 0-15; high nibbles: 16-31 (int6: with its high bits); int4 / int6 take
            // q - 8 / q - 32 on the bytes
    __m128i lo, hi;
    unit_code_halves<F, /*centred=*/true>(codes, k, u, lo, hi);
    if constexpr (F == QuantFormat::kInt4 || F == QuantFormat::kInt6) {
      q[0] = _mm256_cvtepi8_epi32(lo);
      q[1] = _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8));
      q[2] = _mm256_cvtepi8_epi32(hi);
      q[3] = _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8));
    } else {
      q[0] = _mm256_cvtepu8_epi32(lo);
      q[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8));
      q[2] = _mm256_cvtepu8_epi32(hi);
      q[3] = _mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8));
    }
  }
}

// Groups outermost (each row's scale, and minimum, converted once per group), units of the group inside.
template <QuantFormat F, int MB, int R>
LATHE_AVX2 void tile(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                     bool accumulate) {
  constexpr bool kMins = F == QuantFormat::kInt4Asym;
  const int64_t k = w.k, group_units = w.spec.group / 32, groups = k / w.spec.group;
  const int64_t row_bytes = quant_row_bytes(F, k);
  __m256 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  prefetch_next_scales(w, j + R, R, groups);
  for (int64_t g = 0; g < groups; ++g) {
    float d[R], b[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      d[r] = _cvtsh_ss(w.scales[(j + r) * groups + g].bits);
      b[r] = kMins ? _cvtsh_ss(w.mins[(j + r) * groups + g].bits) : 0.f;
    }
    for (int64_t u = g * group_units; u < (g + 1) * group_units; ++u) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i q[4];
        unit_codes<F>(w.codes + (j + r) * row_bytes, k, u, q);
        const __m256 dv = _mm256_set1_ps(d[r]), bv = _mm256_set1_ps(b[r]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          const __m256 qf = _mm256_cvtepi32_ps(q[v]);
          const __m256 wv = kMins ? _mm256_fmadd_ps(qf, dv, bv) : _mm256_mul_ps(qf, dv);
#pragma GCC unroll 4
          for (int i = 0; i < MB; ++i)
            acc[i][r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + u * 32 + v * 8), wv, acc[i][r]);
        }
      }
    }
  }
  avx2::store_tile_sums(acc, y, ldy, j, accumulate);
}

template <QuantFormat F, int MB>
LATHE_AVX2 void rows(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y, int64_t ldy,
                     bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(x, ldx, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<F, MB, 1>(x, ldx, w, j, y, ldy, accumulate);
}

template <QuantFormat F>
LATHE_AVX2 void gemv(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      if (m - i0 == 1)
        rows<F, 1>(x + i0 * ldx, ldx, w, jb, je, y + i0 * ldy, ldy, accumulate);
      else
        rows<F, 2>(x + i0 * ldx, ldx, w, jb, je, y + i0 * ldy, ldy, accumulate);
    }
  }
}

// Rows [j0, j1) of W in f32 (the prefill panels), bit-equal to the scalar definition: (q - 8)·d and q·d + m
// are one rounding each, as the scalar fma(q, d, -8d) and fma(q, d, m) are.
template <QuantFormat F>
LATHE_AVX2 void dequantize(const QuantMatrix& w, int64_t j0, int64_t j1, float* dst) {
  const int64_t groups = w.k / w.spec.group, units_per_group = w.spec.group / kQuantUnit;
  const int64_t row_bytes = quant_row_bytes(F, w.k);
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* codes = w.codes + j * row_bytes;
    float* out = dst + (j - j0) * w.k;
    for (int64_t u = 0; u < w.k / kQuantUnit; ++u) {
      const int64_t g = j * groups + u / units_per_group;
      const __m256 d = _mm256_set1_ps(f16_to_f32(w.scales[g]));
      const __m256 mn = F == QuantFormat::kInt4Asym ? _mm256_set1_ps(f16_to_f32(w.mins[g])) : _mm256_setzero_ps();
      __m256i q[4];
      unit_codes<F>(codes, w.k, u, q);
      for (int v = 0; v < 4; ++v) {
        const __m256 qf = _mm256_cvtepi32_ps(q[v]);
        _mm256_storeu_ps(out + u * kQuantUnit + 8 * v,
                         F == QuantFormat::kInt4Asym ? _mm256_fmadd_ps(qf, d, mn) : _mm256_mul_ps(qf, d));
      }
    }
  }
}

}  // namespace

void quant_dequantize_rows_avx2(const QuantMatrix& w, int64_t j0, int64_t j1, float* dst) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return dequantize<QuantFormat::kInt8>(w, j0, j1, dst);
    case QuantFormat::kInt4:
      return dequantize<QuantFormat::kInt4>(w, j0, j1, dst);
    case QuantFormat::kInt6:
      return dequantize<QuantFormat::kInt6>(w, j0, j1, dst);
    default:
      return dequantize<QuantFormat::kInt4Asym>(w, j0, j1, dst);
  }
}

void quant_gemv_avx2(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
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
