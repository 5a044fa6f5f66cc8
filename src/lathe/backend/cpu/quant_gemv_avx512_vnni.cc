// AVX-512 VNNI quantised decode GEMV: x is quantised per unit of 32 inputs to int8 (ref/quant.h's
// quantize_activation_unit), and each pair of units (64 codes) meets it in one vpdpbusd (u8 x s8 -> 16
// int32 sums of 4 products), against 2 x 13 vector ops per pair to widen, scale and FMA in f32.
//  - vpdpbusd takes unsigned codes: int8 codes are flipped to c = q + 128 (one xor), int4 codes are 0..15
//    as stored; Σ c·xq then exceeds Σ q'·xq (q' the signed code) by off·Σxq (off 128, or int4's 8), taken
//    off once per group with the activations' per-group sums T_g = Σ_{u in g} dx_u·Σxq_u. int4-asym's
//    minimum enters the same way: + m_g·T_g.
//  - int4: a pair's 32 code bytes give [low nibbles | high nibbles] = [u0 0-15, u1 0-15, u0 16-31, u1 16-31];
//    the activations are stored in that order (QuantActivations), so no byte shuffle is needed.
//  - each int32 lane is converted and scaled by dw·dx of its unit (dw from 16 groups' scales widened at once
//    and picked per lane by vpermps); tiles of up to 4 rows of x by 4 rows of W, as the f32 kernel.
// Each output sums its lanes over the pairs in increasing k: the result does not depend on m or the tile.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/quant_gemm.h"

#define LATHE_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 4;
constexpr int64_t kJb = 16;

// Lanes of a pair's second unit: int8 keeps input order (lanes 8-15), int4 the nibble order (4-7, 12-15).
template <QuantFormat F>
constexpr __mmask16 kSecondUnitLanes = F == QuantFormat::kInt8 ? 0xff00 : 0xf0f0;

// Pair p's 64 codes of a W row (units 2p and 2p + 1; `two` false: the row's last, unpaired unit, whose
// partner lanes are zero), as vpdpbusd's unsigned operand.
template <QuantFormat F>
LATHE_AVX512_VNNI inline __m512i pair_codes(const uint8_t* codes, int64_t p, bool two) {
  if constexpr (F == QuantFormat::kInt8) {
    const __m512i q = two ? _mm512_loadu_si512(codes + p * 64) : _mm512_maskz_loadu_epi8(0xffffffffull, codes + p * 64);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m256i c = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + p * 32))
                          : _mm256_maskz_loadu_epi8(0xffff, codes + p * 32);
    const __m256i low = _mm256_set1_epi8(0x0f);
    const __m256i lo = _mm256_and_si256(c, low), hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
}

// The scales (and mins) of rows [j, j + rows) into L1 ahead of the tile that reads them: each 16-group chunk
// starts with a load of them that the whole chunk waits on (at group 32 a 2x slower GEMV without this).
LATHE_AVX512_VNNI inline void prefetch_next_scales(const QuantMatrix& w, int64_t j, int rows, int64_t groups) {
  if (j + rows > w.n) return;
  const int64_t bytes = rows * groups * static_cast<int64_t>(sizeof(f16));
  for (int64_t b = 0; b < bytes; b += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w.scales + j * groups) + b, _MM_HINT_T0);
    if (w.mins) _mm_prefetch(reinterpret_cast<const char*>(w.mins + j * groups) + b, _MM_HINT_T0);
  }
}

template <QuantFormat F, int MB, int R>
LATHE_AVX512_VNNI void tile(const QuantActivations& a, int i0, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                            bool accumulate) {
  const int64_t k = w.k, units = k / 32, pairs = (units + 1) / 2, gu = w.spec.group / 32, groups = k / w.spec.group;
  const int64_t row_bytes = quant_row_bytes(F, k);
  // -off·dw (+ m): the coefficient of T_g (see the top of the file).
  const float off = F == QuantFormat::kInt8 ? 128.f : F == QuantFormat::kInt4 ? 8.f : 0.f;
  __m512 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  prefetch_next_scales(w, j + R, R, groups);
  for (int64_t g0 = 0; g0 < groups; g0 += 16) {
    const __mmask16 gmask = static_cast<__mmask16>((1u << std::min<int64_t>(16, groups - g0)) - 1);
    __m512 ds[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int64_t at = (j + r) * groups + g0;
      ds[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gmask, w.scales + at));
      __m512 coef = _mm512_mul_ps(ds[r], _mm512_set1_ps(-off));
      if constexpr (F == QuantFormat::kInt4Asym)
        coef = _mm512_add_ps(coef, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gmask, w.mins + at)));
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i)
        acc[i][r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(gmask, a.t + (i0 + i) * a.groups + g0), coef, acc[i][r]);
    }
    const int64_t p1 = std::min(pairs, ((g0 + 16) * gu + 1) / 2);
    for (int64_t p = g0 * gu / 2; p < p1; ++p) {
      // Each lane's group, relative to g0: units 2p and 2p + 1 may sit in two groups (group 32).
      const __m512i idx =
          _mm512_mask_blend_epi32(kSecondUnitLanes<F>, _mm512_set1_epi32(static_cast<int>(2 * p / gu - g0)),
                                  _mm512_set1_epi32(static_cast<int>((2 * p + 1) / gu - g0)));
      const bool two = 2 * p + 1 < units;
      __m512i c[R];
      __m512 dw[R];
      constexpr int64_t kPairBytes = F == QuantFormat::kInt8 ? 64 : 32;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // The same codes of the next tile's rows, into L1 one tile ahead: 4-8 row streams at once are more
        // than the hardware prefetcher keeps in flight (gemv_avx512.cc measured the same on bf16).
        _mm_prefetch(reinterpret_cast<const char*>(w.codes + (j + R + r) * row_bytes + p * kPairBytes), _MM_HINT_T0);
        c[r] = pair_codes<F>(w.codes + (j + r) * row_bytes, p, two);
        dw[r] = _mm512_permutexvar_ps(idx, ds[r]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        const __m512i xq = _mm512_load_si512(a.xq + ((i0 + i) * a.pairs + p) * 64);
        const __m512 dx = _mm512_load_ps(a.dx + ((i0 + i) * a.pairs + p) * 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[r], xq);
          acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dx, dw[r]), acc[i][r]);
        }
      }
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
LATHE_AVX512_VNNI void rows(const QuantActivations& a, int i0, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<F, MB, kRows>(a, i0, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<F, MB, 1>(a, i0, w, j, y, ldy, accumulate);
}

template <QuantFormat F>
LATHE_AVX512_VNNI void gemv(const QuantActivations& a, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, bool accumulate) {
  const int m = a.m;
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      float* yi = y + i0 * ldy;
      switch (std::min(kXRows, m - i0)) {
        case 1:
          rows<F, 1>(a, i0, w, jb, je, yi, ldy, accumulate);
          break;
        case 2:
          rows<F, 2>(a, i0, w, jb, je, yi, ldy, accumulate);
          break;
        case 3:
          rows<F, 3>(a, i0, w, jb, je, yi, ldy, accumulate);
          break;
        default:
          rows<F, 4>(a, i0, w, jb, je, yi, ldy, accumulate);
          break;
      }
    }
  }
}

// One unit of x: 32 inputs -> 32 int8 in the pair's order for F, dx in its 8 lanes of the pair's 16, and
// returns dx · Σxq.
template <QuantFormat F>
LATHE_AVX512_VNNI float quantize_unit(const float* x, int64_t u, int8_t* pair_xq, float* pair_dx) {
  const __m512 v0 = _mm512_loadu_ps(x + u * 32), v1 = _mm512_loadu_ps(x + u * 32 + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
  // vcvtps2dq rounds to nearest even (the default MXCSR), as the reference's nearbyint.
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
  const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  const int s = static_cast<int>(u % 2);  // first or second unit of its pair
  int8_t* lo = pair_xq + (F == QuantFormat::kInt8 ? s * 32 : s * 16);
  int8_t* hi = F == QuantFormat::kInt8 ? lo + 16 : pair_xq + 32 + s * 16;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hi), _mm512_cvtsepi32_epi8(q1));
  const __mmask16 lanes = s ? kSecondUnitLanes<F> : static_cast<__mmask16>(~kSecondUnitLanes<F>);
  _mm512_store_ps(pair_dx, _mm512_mask_blend_ps(lanes, _mm512_load_ps(pair_dx), _mm512_set1_ps(dx)));
  return dx * static_cast<float>(sum);
}

template <QuantFormat F>
LATHE_AVX512_VNNI void quantize_rows(const float* x, int64_t ldx, int64_t k, int64_t group, int i0, int i1,
                                     QuantActivations& a) {
  const int64_t gu = group / 32;
  for (int i = i0; i < i1; ++i) {
    int8_t* xq = a.xq + i * a.pairs * 64;
    float* dx = a.dx + i * a.pairs * 16;
    float* t = a.t + i * a.groups;
    // An unpaired last unit: its partner's bytes and scales are zero (no product, no NaN).
    std::fill(xq + (a.pairs - 1) * 64, xq + a.pairs * 64, int8_t{0});
    std::fill(dx + (a.pairs - 1) * 16, dx + a.pairs * 16, 0.f);
    for (int64_t g = 0; g < a.groups; ++g) {
      float tg = 0.f;
      for (int64_t u = g * gu; u < (g + 1) * gu; ++u)
        tg += quantize_unit<F>(x + i * ldx, u, xq + u / 2 * 64, dx + u / 2 * 16);
      t[g] = tg;
    }
  }
}

}  // namespace

void quantize_activations_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, QuantActivations& a) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return quantize_rows<QuantFormat::kInt8>(x, ldx, w.k, w.spec.group, 0, m, a);
    case QuantFormat::kInt4:
      return quantize_rows<QuantFormat::kInt4>(x, ldx, w.k, w.spec.group, 0, m, a);
    default:
      return quantize_rows<QuantFormat::kInt4Asym>(x, ldx, w.k, w.spec.group, 0, m, a);
  }
}

void quant_gemv_avx512_vnni(const QuantActivations& a, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, bool accumulate) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return gemv<QuantFormat::kInt8>(a, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt4:
      return gemv<QuantFormat::kInt4>(a, w, j0, j1, y, ldy, accumulate);
    default:
      return gemv<QuantFormat::kInt4Asym>(a, w, j0, j1, y, ldy, accumulate);
  }
}

}  // namespace lathe::cpu
