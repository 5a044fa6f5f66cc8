// AVX2 integer-dot quantised decode GEMV (CPUs without AVX-512 VNNI): x is quantised per unit of 32 inputs
// to int8 (ref::quantize_activation_unit, as the VNNI path), and a unit of W codes meets it in
// vpmaddubsw (u8 x s8 -> 16 int16 sums of 2 products) + vpmaddwd by ones (-> 8 int32 sums of 4):
//  - int4 codes 0..15 are the unsigned operand as stored; a unit's 16 bytes give its inputs 0-15 (low
//    nibbles) and 16-31 (high nibbles) as one 32-byte vector in input order, so x is stored in input order.
//    Σ q·xq exceeds Σ (q - 8)·xq by 8·Σxq, taken off once per group with T_g = Σ_{u in g} dx_u·Σxq_u
//    (int4-asym adds m_g·T_g instead). int6 is int4's unit with its high bits ORed in (int6_bits.h), codes
//    0..63 and 32·Σxq taken off (2 x 63 x 127 fits int16).
//  - int8 codes are signed: the unsigned operand is |xq| and the signed one the code with xq's sign
//    (vpsignb), so each product is exactly q·xq; 2 x 127 x 127 fits int16 (no saturation).
//  - each unit's 8 int32 lanes are converted and scaled by dw·dx in one FMA: ~9 vector ops per 32 int4
//    weights and row against ~25 to widen, scale and FMA them in f32 (quant_gemv_avx2.cc).
// Tiles of up to 2 rows of x by 4 rows of W (8 accumulators of the 16 ymm registers). Each output sums its
// lanes over the units in increasing k, then the group corrections: the result does not depend on m.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "lathe/backend/cpu/column_chunks.h"
#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/int6_bits.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/base/context.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 2;
constexpr int64_t kJb = 16;

// x quantised per unit: codes in input order [m][k], dx [m][units], T [m][groups].
struct IntActivations {
  int64_t units = 0, groups = 0;
  const int8_t* xq = nullptr;
  const float* dx = nullptr;
  const float* t = nullptr;
};

// Unit u of a W row of k inputs as vpmaddubsw's operand: int8 codes as stored (signed), int4 nibbles (int6
// codes) in input order.
template <QuantFormat F>
LATHE_AVX2 inline __m256i unit_codes(const uint8_t* codes, int64_t k, int64_t u) {
  if constexpr (F == QuantFormat::kInt8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + u * 32));
  } else {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + u * 16));
    const __m128i low = _mm_set1_epi8(0x0f);
    __m128i lo = _mm_and_si128(c, low), hi = _mm_and_si128(_mm_srli_epi16(c, 4), low);
    if constexpr (F == QuantFormat::kInt6) {
      __m128i h_lo, h_hi;
      int6_unit_high(codes + int6_high_plane(k) + u * 8, h_lo, h_hi);
      lo = _mm_or_si128(lo, h_lo);
      hi = _mm_or_si128(hi, h_hi);
    }
    return _mm256_set_m128i(hi, lo);
  }
}

// The scales (and mins) of rows [j, j + rows) into L1 ahead of the tile that reads them, as the other decode
// kernels do.
inline void prefetch_next_scales(const QuantMatrix& w, int64_t j, int rows, int64_t groups) {
  if (j + rows > w.n) return;
  const int64_t bytes = rows * groups * static_cast<int64_t>(sizeof(f16));
  for (int64_t b = 0; b < bytes; b += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w.scales + j * groups) + b, _MM_HINT_T0);
    if (w.mins) _mm_prefetch(reinterpret_cast<const char*>(w.mins + j * groups) + b, _MM_HINT_T0);
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
  // The coefficient of T_g: -8·d for int4, -32·d for int6, m for int4-asym, none for int8 (exact signed
  // products).
  const float off = F == QuantFormat::kInt4 ? 8.f : F == QuantFormat::kInt6 ? 32.f : 0.f;
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
      const float coef = F == QuantFormat::kInt4Asym ? _cvtsh_ss(w.mins[(j + r) * groups + g].bits) : -off * d;
#pragma GCC unroll 2
      for (int i = 0; i < MB; ++i) corr[i][r] += coef * a.t[(i0 + i) * groups + g];
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
      if (F == QuantFormat::kInt6 && u * 8 % 64 == 0)
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(w.codes + (j + kGemvPrefetchTiles * R + r) * row_bytes +
                                                     int6_high_plane(w.k) + u * 8),
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

template <QuantFormat F, int MB>
LATHE_AVX2 void rows(const IntActivations& a, int i0, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(a, i0, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<F, MB, 1>(a, i0, w, j, y, ldy, accumulate);
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

// Row i of x: per unit, dx = max|x| / 127, xq = nearbyint(x / dx) (vcvtps2dq rounds to nearest even in the
// default MXCSR), packed to int8 in input order; T_g = Σ_{u in g} dx_u·Σxq_u.
LATHE_AVX2 void quantize_row(const float* x, int64_t k, int64_t gu, int8_t* xq, float* dx, float* t) {
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
      tg += d * static_cast<float>(_mm_cvtsi128_si32(s4));
    }
    t[g] = tg;
  }
}

}  // namespace

void quant_gemm_avx2_int(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                         bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  const int64_t units = w.k / 32, groups = w.k / w.spec.group;
  const std::shared_ptr<void> buf = current_context().alloc.allocate(
      static_cast<size_t>(m * w.k) + static_cast<size_t>(m * (units + groups)) * sizeof(float));
  auto* xq = static_cast<int8_t*>(buf.get());
  auto* dx = reinterpret_cast<float*>(xq + m * w.k);
  float* t = dx + m * units;
  for (int64_t i = 0; i < m; ++i)
    quantize_row(x + i * ldx, w.k, w.spec.group / 32, xq + i * w.k, dx + i * units, t + i * groups);
  const IntActivations a{units, groups, xq, dx, t};
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
