// What the quantised decode GEMVs of every tier share: a unit's 4- or 6-bit codes as two 16-byte vectors
// (inputs 0-15 and 16-31 of the unit), and the prefetch of the next tile's scales.
// int6 codes (tensor/quant_weight.h): a row's low 4 bits are int4's nibble plane, its high 2 bits a second
// plane of 8 bytes per unit of 32 inputs (byte b: inputs b, b + 8, b + 16, b + 24 in bit pairs 0-1 .. 6-7).
// The int6 helpers lift a unit's high bits to bits 4-5 of the byte where int4's split puts the same input's
// nibble (low nibbles: inputs 0-15, high nibbles: 16-31), so a kernel ORs them in and has the 6-bit code.
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/backend/cpu/simd_intrinsics.h"

namespace lathe::cpu {

// One unit (8 bytes at `high`): lo byte i = high bits of input i << 4, hi byte i = of input 16 + i << 4.
// The 8 bytes are in both 64-bit lanes; lane 0 (inputs 0-7 / 16-23) takes bit pairs 0-1 / 4-5, lane 1
// (inputs 8-15 / 24-31) pairs 2-3 / 6-7: one variable shift each, one mask.
LATHE_AVX2 inline void int6_unit_high(const uint8_t* high, __m128i& lo, __m128i& hi) {
  int64_t bits;
  std::memcpy(&bits, high, 8);
  const __m128i h = _mm_set1_epi64x(bits);
  const __m128i mask = _mm_set1_epi8(0x30);
  lo = _mm_and_si128(_mm_sllv_epi64(h, _mm_set_epi64x(2, 4)), mask);
  hi = _mm_and_si128(_mm_srlv_epi64(h, _mm_set_epi64x(2, 0)), mask);
}

// Four units at once (32 bytes at `high`, `units` <= 4 of them present: the rest read as zero): 128-bit
// lane s of h0 / h1 is unit s's lo / hi of int6_unit_high, beside the 64-byte int4 block's nibbles.
LATHE_AVX512 inline void int6_block_high(const uint8_t* high, int64_t units, __m512i& h0, __m512i& h1) {
  const __m256i raw = units == 4 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high))
                                 : _mm256_maskz_loadu_epi8(static_cast<__mmask32>((1ull << (8 * units)) - 1), high);
  const __m512i h = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3), _mm512_castsi256_si512(raw));
  const __m512i mask = _mm512_set1_epi8(0x30);
  h0 = _mm512_and_si512(_mm512_sllv_epi64(h, _mm512_setr_epi64(4, 2, 4, 2, 4, 2, 4, 2)), mask);
  h1 = _mm512_and_si512(_mm512_srlv_epi64(h, _mm512_setr_epi64(0, 2, 0, 2, 0, 2, 0, 2)), mask);
}

// Unit u of a 4- or 6-bit row of k inputs (int4, int4-asym, int6): lo = the codes of inputs 0-15, hi = of
// inputs 16-31, one byte each, unsigned (0..15, int6 0..63). centred: int4's q - 8 / int6's q - 32 taken
// on the bytes (signed), for the kernels that widen the codes to f32 and scale them by d alone.
template <QuantFormat F, bool centred = false>
LATHE_AVX2 inline void unit_code_halves(const uint8_t* row, int64_t k, int64_t u, __m128i& lo, __m128i& hi) {
  static_assert(F != QuantFormat::kInt8 && F != QuantFormat::kNf4);
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + u * 16));
  const __m128i low = _mm_set1_epi8(0x0f);
  lo = _mm_and_si128(c, low);
  hi = _mm_and_si128(_mm_srli_epi16(c, 4), low);
  if constexpr (F == QuantFormat::kInt6) {
    __m128i h_lo, h_hi;
    int6_unit_high(row + int6_high_plane(k) + u * 8, h_lo, h_hi);
    lo = _mm_or_si128(lo, h_lo);
    hi = _mm_or_si128(hi, h_hi);
  }
  if constexpr (centred && F != QuantFormat::kInt4Asym) {
    const __m128i half = _mm_set1_epi8(F == QuantFormat::kInt4 ? 8 : 32);
    lo = _mm_sub_epi8(lo, half);
    hi = _mm_sub_epi8(hi, half);
  }
}

// The scales (and mins) of W rows [j, j + rows) into L1 ahead of the tile that reads them: each group's scale
// is a load its units wait on (quant_gemv_avx512_vnni.cc measured a 2x slower GEMV at group 32 without this).
inline void prefetch_next_scales(const QuantMatrix& w, int64_t j, int rows, int64_t groups) {
  if (j + rows > w.n) return;
  const int64_t bytes = rows * groups * static_cast<int64_t>(sizeof(f16));
  for (int64_t b = 0; b < bytes; b += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(w.scales + j * groups) + b, _MM_HINT_T0);
    if (w.mins) _mm_prefetch(reinterpret_cast<const char*>(w.mins + j * groups) + b, _MM_HINT_T0);
  }
}

}  // namespace lathe::cpu
