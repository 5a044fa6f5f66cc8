// AVX2 integer-dot quantised decode GEMV (CPUs without AVX-512 VNNI): x is quantised per unit of 32 inputs
// to int8 (ref::quantize_activation_unit, as the VNNI path), and a unit of W codes meets it in
// vpmaddubsw (u8 x s8 -> 16 int16 sums of 2 products) + vpmaddwd by ones (-> 8 int32 sums of 4):
//  - int4 codes 0..15 (int6: 0..63, int4's nibbles with the high bits ORed in, quant_unit_codes.h) are the
//    unsigned operand as stored. Σ q·xq exceeds Σ (q - off)·xq by off·Σxq (off 8, or 32), which enters each
//    unit's sum as an int32 lane (-off·Σxq_u); int4-asym adds m_g·T_g per group instead, T_g = Σ_{u in g}
//    dx_u·Σxq_u.
//  - int8 codes are signed: the unsigned operand is |xq| and the signed one the code with xq's sign
//    (vpsignb), so each product is exactly q·xq; 2 x 127 x 127 fits int16 (no saturation).
//  - int8 and int4-asym take one unit per step (tile: a unit's 16 bytes of nibbles give its inputs 0-15 and
//    16-31 as one 32-byte vector in input order, as x is stored); int4 and int6 two (tile_pairs). Each
//    step's int32 lanes are converted and scaled by dw·dx in one FMA.
// Tiles of up to 2 rows of x by 4 rows of W (8 accumulators of the 16 ymm registers). Each output sums its
// lanes over the units in increasing k, then the group corrections: the result does not depend on m.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "lathe/backend/cpu/column_chunks.h"
#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_unit_codes.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/base/context.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 2;
constexpr int64_t kJb = 16;

// x quantised per unit: codes in input order [m][k], dx [m][units], T [m][groups], and per unit
// -off·Σxq (int4 / int6 at group 32: the pair kernel's integer correction, tile_pairs).
struct IntActivations {
  int64_t units = 0, groups = 0;
  const int8_t* xq = nullptr;
  const float* dx = nullptr;
  const float* t = nullptr;
  const int32_t* corr = nullptr;
};

// Unit u of a W row of k inputs as vpmaddubsw's operand: int8 codes as stored (signed), int4 nibbles (int6
// codes) in input order.
template <QuantFormat F>
LATHE_AVX2 inline __m256i unit_codes(const uint8_t* codes, int64_t k, int64_t u) {
  if constexpr (F == QuantFormat::kInt8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + u * 32));
  } else {
    __m128i lo, hi;
    unit_code_halves<F>(codes, k, u, lo, hi);
    return _mm256_set_m128i(hi, lo);
  }
}

// 8 int32 sums of 4 products code·xq each.
template <QuantFormat F>
LATHE_AVX2 inline __m256i unit_dot(__m256i c, __m256i xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (F == QuantFormat::kInt8)
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(xq), _mm256_sign_epi8(c, xq)), ones);
  else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(c, xq), ones);
}

template <QuantFormat F, int MB, int R>
LATHE_AVX2 void tile(const IntActivations& a, int i0, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                     bool accumulate) {
  const int64_t gu = w.spec.group / 32, groups = a.groups, row_bytes = quant_row_bytes(F, w.k);
  // int8 and int4-asym only (int4 / int6 take tile_pairs). The coefficient of T_g: m for int4-asym, none for
  // int8 (exact signed products).
  static_assert(F == QuantFormat::kInt8 || F == QuantFormat::kInt4Asym);
  constexpr int64_t kUnitBytes = F == QuantFormat::kInt8 ? 32 : 16;  // of the (nibble) codes
  __m256 acc[MB][R];
  float corr[MB][R] = {};
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  prefetch_next_scales(w, j + R, R, groups);
  for (int64_t g = 0; g < groups; ++g) {
    __m256 dv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float d = _cvtsh_ss(w.scales[(j + r) * groups + g].bits);
      dv[r] = _mm256_set1_ps(d);
      if constexpr (F == QuantFormat::kInt4Asym) {
        const float m = _cvtsh_ss(w.mins[(j + r) * groups + g].bits);
#pragma GCC unroll 2
        for (int i = 0; i < MB; ++i) corr[i][r] += m * a.t[(i0 + i) * groups + g];
      }
    }
    for (int64_t u = g * gu; u < (g + 1) * gu; ++u) {
      // Each line of the rows kGemvPrefetchTiles tiles on, into L2, once (gemm_internal.h): the hardware
      // prefetcher alone kept this kernel at a third to a half of its in-cache rate (LATHE_CPU=avx2, Zen 4).
      const int64_t at = u * kUnitBytes;
      if (at % 64 == 0)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w.codes + (j + kGemvPrefetchTiles * R + r) * row_bytes + at),
                       _MM_HINT_T1);
      __m256i xq[MB];
      __m256 dx[MB];
#pragma GCC unroll 2
      for (int i = 0; i < MB; ++i) {
        xq[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + (i0 + i) * w.k + u * 32));
        dx[i] = _mm256_broadcast_ss(a.dx + (i0 + i) * a.units + u);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i c = unit_codes<F>(w.codes + (j + r) * row_bytes, w.k, u);
#pragma GCC unroll 2
        for (int i = 0; i < MB; ++i)
          acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(unit_dot<F>(c, xq[i])), _mm256_mul_ps(dx[i], dv[r]), acc[i][r]);
      }
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float v = avx2::hsum(acc[i][r]) + corr[i][r];
      float& out = y[i * ldy + j + r];
      out = accumulate ? out + v : v;
    }
}

// int4 / int6 at group 32, two units per step: the 32 bytes of units u, u + 1 split into one vector of their
// low-nibble inputs (0-15 of each, a 128-bit lane per unit) and one of their high-nibble inputs (16-31);
// each meets x rearranged the same way (two 128-bit permutes per x row, shared by the 4 W rows), and the two
// vpmaddubsw add in int16 (lanes of one unit: at most 2 x 2 x 63 x 127 = 32004) before one vpmaddwd. Each
// unit's -off·Σxq enters its first int32 lane, so the group correction is exact integer work, and the
// 8 lanes take their unit's dw·dx in one multiply: ~15 vector ops per 64 int4 weights and row against 24 of
// tile() (10 per unit plus the scalar scale and correction). An odd last unit takes one unit step.
template <QuantFormat F>
LATHE_AVX2 inline void pair_codes(const uint8_t* row, int64_t k, int64_t u, __m256i& lo, __m256i& hi) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + u * 16));
  const __m256i low = _mm256_set1_epi8(0x0f);
  lo = _mm256_and_si256(c, low);
  hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low);
  if constexpr (F == QuantFormat::kInt6) {
    // Units u, u + 1's 8 high bytes each in both halves of their 128-bit lane, then int6_unit_high's shifts.
    const __m256i h = _mm256_permute4x64_epi64(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + int6_high_plane(k) + u * 8))),
        0x50);  // qwords 0, 0, 1, 1
    const __m256i mask = _mm256_set1_epi8(0x30);
    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_sllv_epi64(h, _mm256_setr_epi64x(4, 2, 4, 2)), mask));
    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_srlv_epi64(h, _mm256_setr_epi64x(0, 2, 0, 2)), mask));
  }
}

template <QuantFormat F, int MB, int R>
LATHE_AVX2 void tile_pairs(const IntActivations& a, int i0, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                           bool accumulate) {
  const int64_t units = a.units, row_bytes = quant_row_bytes(F, w.k);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i first_lanes = _mm256_setr_epi32(0, 2, 2, 2, 1, 2, 2, 2);  // {v0, 0, 0, 0, v1, 0, 0, 0}
  const __m256i unit_lanes = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc[MB][R];
#pragma GCC unroll 2
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
  prefetch_next_scales(w, j + R, R, units);
  int64_t u = 0;
  for (; u + 2 <= units; u += 2) {
    if (u % 4 == 0)  // 64 bytes of nibbles per 4 units; int6's high plane: 64 bytes per 8
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* ahead = w.codes + (j + kGemvPrefetchTiles * R + r) * row_bytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead + u * 16), _MM_HINT_T1);
        if (F == QuantFormat::kInt6 && u % 8 == 0)
          _mm_prefetch(reinterpret_cast<const char*>(ahead + int6_high_plane(w.k) + u * 8), _MM_HINT_T1);
      }
    __m256i x_lo[MB], x_hi[MB], corr[MB];
    __m256 dx[MB];
#pragma GCC unroll 2
    for (int i = 0; i < MB; ++i) {
      const int8_t* xb = a.xq + (i0 + i) * w.k + u * 32;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32));
      x_lo[i] = _mm256_permute2x128_si256(x0, x1, 0x20);
      x_hi[i] = _mm256_permute2x128_si256(x0, x1, 0x31);
      const int64_t at = (i0 + i) * units + u;
      corr[i] = _mm256_permutevar8x32_epi32(
          _mm256_zextsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a.corr + at))), first_lanes);
      dx[i] = _mm256_permutevar8x32_ps(
          _mm256_zextps128_ps256(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a.dx + at)))),
          unit_lanes);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = w.codes + (j + r) * row_bytes;
      __m256i c_lo, c_hi;
      pair_codes<F>(row, w.k, u, c_lo, c_hi);
      int32_t two;
      std::memcpy(&two, w.scales + (j + r) * units + u, 4);
      const __m256 dw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(two))), unit_lanes);
#pragma GCC unroll 2
      for (int i = 0; i < MB; ++i) {
        const __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(c_lo, x_lo[i]), _mm256_maddubs_epi16(c_hi, x_hi[i]));
        const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(p16, ones), corr[i]);
        acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dx[i], dw), acc[i][r]);
      }
    }
  }
  if (u < units) {  // the odd last unit: 8 lanes of its own, its correction in lane 0
#pragma GCC unroll 2
    for (int i = 0; i < MB; ++i) {
      const int64_t at = (i0 + i) * units + u;
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xq + (i0 + i) * w.k + u * 32));
      const __m256i corr = _mm256_setr_epi32(a.corr[at], 0, 0, 0, 0, 0, 0, 0);
      const __m256 dx = _mm256_broadcast_ss(a.dx + at);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i c = unit_codes<F>(w.codes + (j + r) * row_bytes, w.k, u);
        const __m256i dot = _mm256_add_epi32(unit_dot<F>(c, xq), corr);
        const __m256 dw = _mm256_set1_ps(_cvtsh_ss(w.scales[(j + r) * units + u].bits));
        acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dx, dw), acc[i][r]);
      }
    }
  }
  avx2::store_tile_sums(acc, y, ldy, j, accumulate);
}

template <QuantFormat F, int MB>
LATHE_AVX2 void rows(const IntActivations& a, int i0, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate) {
  int64_t j = j0;
  if constexpr (F == QuantFormat::kInt4 || F == QuantFormat::kInt6) {  // group 32: two units per step
    for (; j + kRows <= j1; j += kRows) tile_pairs<F, MB, kRows>(a, i0, w, j, y, ldy, accumulate);
    for (; j < j1; ++j) tile_pairs<F, MB, 1>(a, i0, w, j, y, ldy, accumulate);
  } else {
    for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(a, i0, w, j, y, ldy, accumulate);
    for (; j < j1; ++j) tile<F, MB, 1>(a, i0, w, j, y, ldy, accumulate);
  }
}

template <QuantFormat F>
LATHE_AVX2 void gemv(int m, const IntActivations& a, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      if (m - i0 == 1)
        rows<F, 1>(a, i0, w, jb, je, y + i0 * ldy, ldy, accumulate);
      else
        rows<F, 2>(a, i0, w, jb, je, y + i0 * ldy, ldy, accumulate);
    }
  }
}

}  // namespace

// Row i of x: per unit, dx = max|x| / 127, xq = nearbyint(x / dx) (vcvtps2dq rounds to nearest even in the
// default MXCSR), packed to int8 in input order; T_g = Σ_{u in g} dx_u·Σxq_u; corr_u = -off·Σxq_u
// (off 0: Σxq_u).
LATHE_AVX2 void quantize_activation_row_avx2(const float* x, int64_t k, int64_t gu, int off, int8_t* xq, float* dx,
                                             float* t, int32_t* corr) {
  for (int64_t g = 0; g < k / (32 * gu); ++g) {
    float tg = 0.f;
    for (int64_t u = g * gu; u < (g + 1) * gu; ++u) {
      const float* src = x + u * 32;
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      const __m256 sign = _mm256_set1_ps(-0.f);
      for (int q = 0; q < 4; ++q) {
        v[q] = _mm256_loadu_ps(src + 8 * q);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[q]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float d = _mm_cvtss_f32(m4) / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      __m256i q32[4];
      for (int q = 0; q < 4; ++q) q32[q] = _mm256_cvtps_epi32(_mm256_mul_ps(v[q], _mm256_set1_ps(id)));
      // int32 -> int16 -> int8 packs interleave the 128-bit lanes; one dword permute restores input order.
      const __m256i w16a = _mm256_packs_epi32(q32[0], q32[1]), w16b = _mm256_packs_epi32(q32[2], q32[3]);
      const __m256i b8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w16a, w16b),
                                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + u * 32), b8);
      const __m256i s = _mm256_add_epi32(_mm256_add_epi32(q32[0], q32[1]), _mm256_add_epi32(q32[2], q32[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      dx[u] = d;
      const int32_t sum = _mm_cvtsi128_si32(s4);
      corr[u] = off == 0 ? sum : -off * sum;
      tg += d * static_cast<float>(sum);
    }
    if (t) t[g] = tg;
  }
}

void quant_gemm_avx2_int(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                         bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  const int64_t units = w.k / 32, groups = w.k / w.spec.group;
  const std::shared_ptr<void> buf = current_context().alloc.allocate(
      static_cast<size_t>(m * w.k) + static_cast<size_t>(m * (2 * units + groups)) * sizeof(float));
  auto* xq = static_cast<int8_t*>(buf.get());
  auto* dx = reinterpret_cast<float*>(xq + m * w.k);
  float* t = dx + m * units;
  auto* corr = reinterpret_cast<int32_t*>(t + m * groups);
  const int off = w.spec.format == QuantFormat::kInt4 ? 8 : w.spec.format == QuantFormat::kInt6 ? 32 : 0;
  for (int64_t i = 0; i < m; ++i)
    quantize_activation_row_avx2(x + i * ldx, w.k, w.spec.group / 32, off, xq + i * w.k, dx + i * units,
                                 t + i * groups, corr + i * units);
  const IntActivations a{units, groups, xq, dx, t, corr};
  for_column_chunks(w.n, w.k, pool, [&](int64_t j0, int64_t j1) {
    switch (w.spec.format) {
      case QuantFormat::kInt8:
        return gemv<QuantFormat::kInt8>(static_cast<int>(m), a, w, j0, j1, y, ldy, accumulate);
      case QuantFormat::kInt4:
        return gemv<QuantFormat::kInt4>(static_cast<int>(m), a, w, j0, j1, y, ldy, accumulate);
      case QuantFormat::kInt6:
        return gemv<QuantFormat::kInt6>(static_cast<int>(m), a, w, j0, j1, y, ldy, accumulate);
      default:
        return gemv<QuantFormat::kInt4Asym>(static_cast<int>(m), a, w, j0, j1, y, ldy, accumulate);
    }
  });
}

}  // namespace lathe::cpu
