// AVX-512 NF4 decode GEMV: y[i, j] = x_i · deq(W row j) for m <= 16 rows of x, W in bitsandbytes' NF4 layout with every
// row starting a block (k a multiple of the blocksize; the dispatcher sends other shapes to the scalar tier). One step
// is 32 inputs: 16 bytes of codes, split into high nibbles (even inputs) and low ones (odd inputs), interleaved back
// into input order with one unpack each way, widened to 16 indices and looked up in the 16-entry code table held in one
// register (vpermps), then scaled by the block's absmax: nf4[q]·absmax, the f32 product the reference computes. A tile
// is up to 4 rows of x against 4 rows of W; m > 4 runs blocks of kJb W rows against each group of 4 x rows in turn (W
// read from DRAM once). Each output is one 16-lane accumulator summed in increasing k, then reduced: the result depends
// on k only.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/avx512_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/ref/nf4.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;
constexpr int kXRows = 4;
constexpr int64_t kJb = 16;

// 32 inputs from 16 bytes of codes -> two f32 vectors (inputs 0-15 and 16-31), times the block's absmax.
LATHE_AVX512 inline void dequantize_unit(const uint8_t *c, __m512 table, __m512 amax, __m512 &w0, __m512 &w1) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i *>(c));
  const __m128i low = _mm_set1_epi8(0x0f);
  const __m128i even = _mm_and_si128(_mm_srli_epi16(q, 4), low), odd = _mm_and_si128(q, low);
  const __m512i i0 = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(even, odd));
  const __m512i i1 = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(even, odd));
  w0 = _mm512_mul_ps(_mm512_permutexvar_ps(i0, table), amax);
  w1 = _mm512_mul_ps(_mm512_permutexvar_ps(i1, table), amax);
}

template <int MB, int R>
LATHE_AVX512 void tile(const float *x, int64_t ldx, const QuantMatrix &w, int64_t j, float *y, int64_t ldy,
                       bool accumulate) {
  const int64_t k = w.k, bs = w.spec.group, blocks_per_row = k / bs, row_bytes = k / 2;
  const __m512 table = _mm512_loadu_ps(ref::kNf4Code);
  __m512 acc[MB][R];
#pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < blocks_per_row; ++g) {
    __m512 amax[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) amax[r] = _mm512_set1_ps(w.absmax[(j + r) * blocks_per_row + g]);
    for (int64_t u = g * bs / 32; u < (g + 1) * bs / 32; ++u) {
      __m512 x0[MB], x1[MB];
#pragma GCC unroll 4
      for (int i = 0; i < MB; ++i) {
        x0[i] = _mm512_loadu_ps(x + i * ldx + u * 32);
        x1[i] = _mm512_loadu_ps(x + i * ldx + u * 32 + 16);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m512 w0, w1;
        dequantize_unit(w.codes + (j + r) * row_bytes + u * 16, table, amax[r], w0, w1);
#pragma GCC unroll 4
        for (int i = 0; i < MB; ++i) acc[i][r] = _mm512_fmadd_ps(x1[i], w1, _mm512_fmadd_ps(x0[i], w0, acc[i][r]));
      }
    }
  }
  avx512::store_tile_sums(acc, y, ldy, j, accumulate);
}

template <int MB>
LATHE_AVX512 void rows(const float *x, int64_t ldx, const QuantMatrix &w, int64_t j0, int64_t j1, float *y, int64_t ldy,
                       bool accumulate) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows) tile<MB, kRows>(x, ldx, w, j, y, ldy, accumulate);
  for (; j < j1; ++j) tile<MB, 1>(x, ldx, w, j, y, ldy, accumulate);
}

}  // namespace

void nf4_gemv_avx512(int m, const float *x, int64_t ldx, const QuantMatrix &w, int64_t j0, int64_t j1, float *y,
                     int64_t ldy, bool accumulate) {
  const int64_t block = m <= kXRows ? j1 - j0 : kJb;
  for (int64_t jb = j0; jb < j1; jb += block) {
    const int64_t je = std::min(j1, jb + block);
    for (int i0 = 0; i0 < m; i0 += kXRows) {
      const float *xi = x + i0 * ldx;
      float *yi = y + i0 * ldy;
      switch (std::min(kXRows, m - i0)) {
        case 1:
          rows<1>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        case 2:
          rows<2>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        case 3:
          rows<3>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
        default:
          rows<4>(xi, ldx, w, jb, je, yi, ldy, accumulate);
          break;
      }
    }
  }
}

}  // namespace lathe::cpu
