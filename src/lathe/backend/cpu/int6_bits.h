// int6 codes (tensor/quant_weight.h): a row's low 4 bits are int4's nibble plane, its high 2 bits a second
// plane of 8 bytes per unit of 32 inputs (byte b: inputs b, b + 8, b + 16, b + 24 in bit pairs 0-1 .. 6-7).
// These helpers lift a unit's high bits to bits 4-5 of the byte where int4's split puts the same input's
// nibble (low nibbles: inputs 0-15, high nibbles: 16-31), so a kernel ORs them in and has the 6-bit code.
#pragma once

#include <cstdint>
#include <cstring>

#include "lathe/backend/cpu/gemm_internal.h"
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

}  // namespace lathe::cpu
