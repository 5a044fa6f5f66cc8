// AVX-512 quantised decode GEMV: y[i, j] = x_i · deq(W row j) for m <= 16 rows of x. One step is one unit
// of 32 inputs: its codes (32 bytes of int8, or 16 bytes of int4 nibbles: low nibbles inputs 0-15, high
// ones 16-31) widen to two f32 vectors and take the group's scale in registers (int8 d·q; int4
// fma(q, d, -8d); int4-asym fma(q, d, m)), then meet x with one FMA per vector and row of x.
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

#include "lathe/backend/cpu/quant_gemm.h"

// The tier's target, with F16C for the scalar f16 -> f32 of a group's scale (every AVX-512 CPU has it).
#define LATHE_AVX512_Q __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;   // W rows per tile
constexpr int kXRows = 4;  // x rows per tile
constexpr int64_t kJb = 16;  // W rows per block when m > 4

LATHE_AVX512_Q inline float f16_scalar(f16 h) { return _cvtsh_ss(h.bits); }

// Unit u of W row `codes` (its group's scale d and, int4, offset b = -8d or the minimum) -> two f32 vectors
// of inputs [32u, 32u + 16) and [32u + 16, 32u + 32).
template <QuantFormat F>
LATHE_AVX512_Q inline void dequantize_unit(const uint8_t* codes, int64_t u, __m512 d, __m512 b, __m512& w0,
                                           __m512& w1) {
  if constexpr (F == QuantFormat::kInt8) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + u * 32));
    w0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))), d);
    w1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))), d);
  } else {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + u * 16));
    const __m128i low = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(q, low), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low);
    w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), d, b);
    w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), d, b);
  }
}

// Rows [j, j + R) of W against rows 0..MB of x (x, y already at the tile's first row).
template <QuantFormat F, int MB, int R>
LATHE_AVX512_Q void tile(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                         bool accumulate) {
  const int64_t k = w.k, units = k / 32, group_units = w.spec.group / 32, groups = k / w.spec.group;
  const int64_t row_bytes = quant_row_bytes(F, k);
  const uint8_t* codes[R];
  const f16* scales[R];
  const f16* mins[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    codes[r] = w.codes + (j + r) * row_bytes;
    scales[r] = w.scales + (j + r) * groups;
    mins[r] = F == QuantFormat::kInt4Asym ? w.mins + (j + r) * groups : nullptr;
  }
  __m512 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  __m512 d[R], b[R];
  for (int64_t u = 0; u < units; ++u) {
    if (u % group_units == 0) {  // a new group: its scale (and offset) for each row
      const int64_t g = u / group_units;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const float dr = f16_scalar(scales[r][g]);
        d[r] = _mm512_set1_ps(dr);
        if constexpr (F == QuantFormat::kInt4) b[r] = _mm512_set1_ps(-8.f * dr);
        if constexpr (F == QuantFormat::kInt4Asym) b[r] = _mm512_set1_ps(f16_scalar(mins[r][g]));
      }
    }
    __m512 x0[MB], x1[MB];
#pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) {
      x0[i] = _mm512_loadu_ps(x + i * ldx + u * 32);
      x1[i] = _mm512_loadu_ps(x + i * ldx + u * 32 + 16);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512 w0, w1;
      dequantize_unit<F>(codes[r], u, d[r], b[r], w0, w1);
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) acc[i][r] = _mm512_fmadd_ps(x1[i], w1, _mm512_fmadd_ps(x0[i], w0, acc[i][r]));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float v = _mm512_reduce_add_ps(acc[i][r]);
      float& out = y[i * ldy + j + r];
      out = accumulate ? out + v : v;
    }
}

template <QuantFormat F, int MB>
LATHE_AVX512_Q void rows(const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                         int64_t ldy, bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(x, ldx, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<F, MB, 1>(x, ldx, w, j, y, ldy, accumulate);
}

template <QuantFormat F>
LATHE_AVX512_Q void gemv(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                         int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      const float* xi = x + i0 * ldx;
      float* yi = y + i0 * ldy;
      switch (std::min(kXRows, m - i0)) {
        case 1: rows<F, 1>(xi, ldx, w, jb, je, yi, ldy, accumulate); break;
        case 2: rows<F, 2>(xi, ldx, w, jb, je, yi, ldy, accumulate); break;
        case 3: rows<F, 3>(xi, ldx, w, jb, je, yi, ldy, accumulate); break;
        default: rows<F, 4>(xi, ldx, w, jb, je, yi, ldy, accumulate); break;
      }
    }
  }
}

}  // namespace

void quant_gemv_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate) {
  switch (w.spec.format) {
    case QuantFormat::kInt8: return gemv<QuantFormat::kInt8>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt4: return gemv<QuantFormat::kInt4>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
    default: return gemv<QuantFormat::kInt4Asym>(m, x, ldx, w, j0, j1, y, ldy, accumulate);
  }
}

}  // namespace lathe::cpu
