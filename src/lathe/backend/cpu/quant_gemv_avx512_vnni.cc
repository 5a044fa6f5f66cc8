// AVX-512 VNNI quantised decode GEMV: x is quantised per unit of 32 inputs to int8 (ref/quant.h's
// quantize_activation_unit), and W's codes are met 64 bytes at a time in vpdpbusd (u8 x s8 -> 16 int32 sums
// of 4 products), against 2 x 13 vector ops per 64 inputs to widen, scale and FMA in f32.
//  - A block is 64 bytes of a W row's codes: 2 int8 units, or 4 int4 units. int4's 64 bytes split with one
//    mask and one shift+mask into the units' low-nibble inputs (0-15 of each unit) and high-nibble inputs
//    (16-31), two vpdpbusd whose int32 lanes belong to the same unit (lane l: unit l/4), so they accumulate
//    into one sum before the single convert and scale: ~9 vector ops per 128 int4 weights. int6 is int4's
//    block with the 4 units' 32 bytes of high bits ORed in (quant_unit_codes.h): ~6 more.
//  - vpdpbusd takes unsigned codes: int8 codes are flipped to c = q + 128 (one xor), int4 / int6 codes are
//    0..15 / 0..63 as stored; Σ c·xq then exceeds Σ q'·xq (q' the signed code) by off·Σxq (off 128, 8, 32), taken
//    off once per group with the activations' per-group sums T_g = Σ_{u in g} dx_u·Σxq_u. int4-asym's
//    minimum enters the same way: + m_g·T_g.
//  - The activations are stored per block in the order its codes load (QuantActivations), so no byte
//    shuffle is needed.
//  - each int32 lane is converted and scaled by dw·dx of its unit (dw from 16 groups' scales widened at once
//    and picked per lane by vpermps); tiles of up to 4 rows of x by 4 rows of W, as the f32 kernel.
// Each output sums its lanes over the blocks in increasing k: the result does not depend on m or the tile.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/avx512_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_unit_codes.h"
#include "lathe/backend/cpu/quant_gemm.h"

#define LATHE_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 4;
constexpr int64_t kJb = 16;

template <QuantFormat F>
constexpr int kUnitsPerBlock = F == QuantFormat::kInt8 ? 2 : 4;
template <QuantFormat F>
constexpr int kLanesPerUnit = 16 / kUnitsPerBlock<F>;

// The codes of block b of a W row of k inputs (units [b·U, b·U + units), units < U at the row's end: the
// rest zero) as vpdpbusd's unsigned operands: one vector for int8, the low- and high-nibble inputs' vectors
// for int4 and int6.
template <QuantFormat F>
LATHE_AVX512_VNNI inline void block_codes(const uint8_t* codes, int64_t k, int64_t b, int64_t units, __m512i& c0,
                                          __m512i& c1) {
  constexpr int64_t kUnitBytes = F == QuantFormat::kInt8 ? 32 : 16;
  const uint8_t* at = codes + b * 64;
  const __m512i c = units == kUnitsPerBlock<F> ? _mm512_loadu_si512(at)
                                                : _mm512_maskz_loadu_epi8(~0ull >> (64 - units * kUnitBytes), at);
  if constexpr (F == QuantFormat::kInt8) {
    c0 = _mm512_xor_si512(c, _mm512_set1_epi8(static_cast<char>(0x80)));
    c1 = _mm512_setzero_si512();  // unused
  } else {
    const __m512i low = _mm512_set1_epi8(0x0f);
    c0 = _mm512_and_si512(c, low);
    c1 = _mm512_and_si512(_mm512_srli_epi16(c, 4), low);
    if constexpr (F == QuantFormat::kInt6) {
      __m512i h0, h1;
      int6_block_high(codes + int6_high_plane(k) + b * 32, units, h0, h1);
      c0 = _mm512_or_si512(c0, h0);
      c1 = _mm512_or_si512(c1, h1);
    }
  }
}

template <QuantFormat F, int MB, int R>
LATHE_AVX512_VNNI void tile(const QuantActivations& a, int i0, const QuantMatrix& w, int64_t j, float* y, int64_t ldy,
                            bool accumulate) {
  constexpr int64_t kU = kUnitsPerBlock<F>;
  const int64_t k = w.k, units = k / 32, gu = w.spec.group / 32, groups = k / w.spec.group;
  const int64_t row_bytes = quant_row_bytes(F, k);
  const int gshift = gu == 1 ? 0 : gu == 2 ? 1 : 2;  // group / 32 is 1, 2 or 4
  // -off·dw (+ m): the coefficient of T_g (see the top of the file).
  const float off = F == QuantFormat::kInt8     ? 128.f
                    : F == QuantFormat::kInt4   ? 8.f
                    : F == QuantFormat::kInt6   ? 32.f
                                                : 0.f;
  // Lane l's unit within its block.
  const __m512i lane_unit = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              kU == 2 ? 3 : 2);
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
    // 16 groups are 16·gu units, a whole number of blocks (gu is 1, 2 or 4; a block 2 or 4 units).
    const int64_t b1 = std::min(a.blocks, (g0 + 16) * gu / kU);
    for (int64_t b = g0 * gu / kU; b < b1; ++b) {
      // Each lane's group, relative to g0.
      const __m512i idx = _mm512_sub_epi32(
          _mm512_srli_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(b * kU)), lane_unit), gshift),
          _mm512_set1_epi32(static_cast<int>(g0)));
      const int64_t n_units = std::min(kU, units - b * kU);
      __m512i c0[R], c1[R];
      __m512 dw[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // The same codes kGemvPrefetchTiles tiles on, into L2 (gemm_internal.h): more row streams at once
        // than the hardware prefetcher keeps in flight.
        const uint8_t* ahead = w.codes + (j + kGemvPrefetchTiles * R + r) * row_bytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead + b * 64), _MM_HINT_T1);
        if constexpr (F == QuantFormat::kInt6)
          _mm_prefetch(reinterpret_cast<const char*>(ahead + int6_high_plane(k) + b * 32), _MM_HINT_T1);
        block_codes<F>(w.codes + (j + r) * row_bytes, k, b, n_units, c0[r], c1[r]);
        dw[r] = _mm512_permutexvar_ps(idx, ds[r]);
      }
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        const int8_t* xb = a.xq + ((i0 + i) * a.blocks + b) * a.block_bytes;
        const __m512i x0 = _mm512_load_si512(xb);
        const __m512 dx = _mm512_load_ps(a.dx + ((i0 + i) * a.blocks + b) * 16);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c0[r], x0);
          if constexpr (F != QuantFormat::kInt8) dot = _mm512_dpbusd_epi32(dot, c1[r], _mm512_load_si512(xb + 64));
          acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dx, dw[r]), acc[i][r]);
        }
      }
    }
  }
  avx512::store_tile_sums(acc, y, ldy, j, accumulate);
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

// One unit of x: 32 inputs -> 32 int8 where its block's codes meet them (int8: 32 in order at 32·s; int4:
// inputs 0-15 at 16·s, 16-31 at 64 + 16·s, s the unit's place in its block), dx in its lanes of the block's
// 16, and returns dx · Σxq.
template <QuantFormat F>
LATHE_AVX512_VNNI float quantize_unit(const float* x, int64_t u, int8_t* block_xq, float* block_dx) {
  const __m512 v0 = _mm512_loadu_ps(x + u * 32), v1 = _mm512_loadu_ps(x + u * 32 + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
  // vcvtps2dq rounds to nearest even (the default MXCSR), as the reference's nearbyint.
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
  const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  const int s = static_cast<int>(u % kUnitsPerBlock<F>);
  int8_t* lo = block_xq + (F == QuantFormat::kInt8 ? s * 32 : s * 16);
  int8_t* hi = F == QuantFormat::kInt8 ? lo + 16 : block_xq + 64 + s * 16;
  _mm_storeu_si128(reinterpret_cast<__m128i*>(lo), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(hi), _mm512_cvtsepi32_epi8(q1));
  constexpr int kL = kLanesPerUnit<F>;
  const __mmask16 lanes = static_cast<__mmask16>(((1u << kL) - 1) << (s * kL));
  _mm512_store_ps(block_dx, _mm512_mask_blend_ps(lanes, _mm512_load_ps(block_dx), _mm512_set1_ps(dx)));
  return dx * static_cast<float>(sum);
}

template <QuantFormat F>
LATHE_AVX512_VNNI void quantize_rows(const float* x, int64_t ldx, int64_t group, int i0, int i1, QuantActivations& a) {
  const int64_t gu = group / 32, per_block = kUnitsPerBlock<F>;
  for (int i = i0; i < i1; ++i) {
    int8_t* xq = a.xq + i * a.blocks * a.block_bytes;
    float* dx = a.dx + i * a.blocks * 16;
    float* t = a.t + i * a.groups;
    // A partial last block: its missing units' bytes and scales are zero (no product, no NaN).
    std::fill(xq + (a.blocks - 1) * a.block_bytes, xq + a.blocks * a.block_bytes, int8_t{0});
    std::fill(dx + (a.blocks - 1) * 16, dx + a.blocks * 16, 0.f);
    for (int64_t g = 0; g < a.groups; ++g) {
      float tg = 0.f;
      for (int64_t u = g * gu; u < (g + 1) * gu; ++u)
        tg += quantize_unit<F>(x + i * ldx, u, xq + u / per_block * a.block_bytes, dx + u / per_block * 16);
      t[g] = tg;
    }
  }
}

}  // namespace

void quantize_activations_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, QuantActivations& a) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return quantize_rows<QuantFormat::kInt8>(x, ldx, w.spec.group, 0, m, a);
    case QuantFormat::kInt4:
      return quantize_rows<QuantFormat::kInt4>(x, ldx, w.spec.group, 0, m, a);
    case QuantFormat::kInt6:
      return quantize_rows<QuantFormat::kInt6>(x, ldx, w.spec.group, 0, m, a);
    default:
      return quantize_rows<QuantFormat::kInt4Asym>(x, ldx, w.spec.group, 0, m, a);
  }
}

void quant_gemv_avx512_vnni(const QuantActivations& a, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, bool accumulate) {
  switch (w.spec.format) {
    case QuantFormat::kInt8:
      return gemv<QuantFormat::kInt8>(a, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt4:
      return gemv<QuantFormat::kInt4>(a, w, j0, j1, y, ldy, accumulate);
    case QuantFormat::kInt6:
      return gemv<QuantFormat::kInt6>(a, w, j0, j1, y, ldy, accumulate);
    default:
      return gemv<QuantFormat::kInt4Asym>(a, w, j0, j1, y, ldy, accumulate);
  }
}

}  // namespace lathe::cpu
