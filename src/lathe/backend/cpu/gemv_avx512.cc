// AVX-512 GEMV for bf16 weights stored [N, K] (a Linear weight, trans_b): the decode path (M <= kGemvMaxM,
// kGemvGroup rows of x per pass over a block of W rows), which is bound by how fast W streams from DRAM.
// Two things keep it at the read bandwidth:
//  - widening costs one ALU op per 16 weights: a 64-byte load holds 32 bf16, i.e. 16 (even, odd) pairs
//    per 32-bit lane; `<< 16` gives the even weights as f32 and `& 0xffff0000` the odd ones, so x is
//    reordered once per call to match (per 32 columns: the 16 even entries, then the 16 odd ones);
//  - the next group of W rows is prefetched while the current one is summed: rows of Llama shapes are
//    4 KiB (one page each), where the hardware prefetcher restarts on every row and leaves too few
//    lines in flight (measured: 77% -> 88% of a read-only probe over a Llama-1B token's weights).
// Products and sums stay in f32 (bf16 -> f32 is exact), so results match the scalar reference to f32
// summation error.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC PR 105593, see gemm_avx512.cc
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <memory>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;        // W rows summed together (4 x kGemvGroup accumulators)
constexpr int64_t kBlock = 32;  // bf16 per 64-byte load

// xd [m][kp] (kp = k rounded up to 32) = x [m][k] reordered per 32-block into (evens, odds), zero padded.
void deinterleave_x(int m, int64_t k, int64_t kp, const float* x, float* xd) {
  for (int i = 0; i < m; ++i)
    for (int64_t p = 0; p < kp; p += kBlock)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t even = p + 2 * l, odd = even + 1;
        xd[i * kp + p + l] = even < k ? x[i * k + even] : 0.f;
        xd[i * kp + p + 16 + l] = odd < k ? x[i * k + odd] : 0.f;
      }
}

LATHE_AVX512 inline void store_y(float* y, float v, float alpha, float beta) {
  *y = beta == 0.f ? alpha * v : alpha * v + beta * *y;
}

// acc[i][r] += x_i · W[row r] over one 32-column block; w points at the block in row 0, rows ldw apart.
template <int M, int R>
LATHE_AVX512 inline void dot_block(const float* xd, int64_t kp, const bf16* w, int64_t ldw, __mmask32 mask,
                                   __m512 (&acc)[M][R]) {
  const __m512i odd_bits = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 xe[M], xo[M];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    xe[i] = _mm512_load_ps(xd + i * kp);
    xo[i] = _mm512_load_ps(xd + i * kp + 16);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m512i v = _mm512_maskz_loadu_epi16(mask, w + r * ldw);
    const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(v, odd_bits));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) acc[i][r] = _mm512_fmadd_ps(xo[i], wo, _mm512_fmadd_ps(xe[i], we, acc[i][r]));
  }
}

// Rows [j, j + R) of W: y[i][j + r] = alpha * x_i · W[j + r] + beta * y[i][j + r]. With prefetch, the
// same columns of the next R rows are requested one group ahead (R x 4 KiB ahead for Llama shapes).
template <int M, int R>
LATHE_AVX512 void gemv_rows(int64_t k, int64_t kp, const float* xd, const bf16* w, int64_t ldw, int64_t j, float* y,
                            int64_t ldy, float alpha, float beta, bool prefetch) {
  __m512 acc[M][R];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  const bf16* wj = w + j * ldw;
  const int64_t k_main = k / kBlock * kBlock;
  for (int64_t p = 0; p < k_main; p += kBlock) {
    if (prefetch) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(wj + (R + r) * ldw + p), _MM_HINT_T0);
    }
    dot_block<M, R>(xd + p, kp, wj + p, ldw, ~__mmask32(0), acc);
  }
  if (k_main < k) {  // last, partial block: masked loads (x is zero padded)
    const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (k - k_main)) - 1);
    dot_block<M, R>(xd + k_main, kp, wj + k_main, ldw, tail, acc);
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) store_y(y + i * ldy + j + r, _mm512_reduce_add_ps(acc[i][r]), alpha, beta);
}

// m > kGemvGroup: tiles, as gemm_avx512.cc's f32 gemv_nt: a block of kJb W rows is summed one K chunk
// (kKc) at a time so that the chunk of x (m x kKc f32) and of W stay in L1 while every (group of x rows,
// 4 W rows) tile runs over it, partial sums kept in `sums` [m][kJb]. Chunks are whole 32-wide blocks and
// sums round-trip exactly: bit for bit the result of one pass.
constexpr int kJb = 8;
constexpr int64_t kKc = 256;

// sums[i * kJb + r] += lanes of x_i · W[j + r] over k [p0, p1) (G rows of x at xd, R rows of W at wj).
// With prefetch (the first group of x rows), each step also requests the same columns of the next block's
// rows (kJb rows on): without it the DRAM sat idle while the other groups ran from L1 (M = 5 took 2x M = 4).
template <int G, int R>
LATHE_AVX512 void gemv_tile(int64_t k, int64_t kp, int64_t p0, int64_t p1, const float* xd, const bf16* wj,
                            int64_t ldw, __m512* sums, bool prefetch) {
  __m512 acc[G][R];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = sums[i * kJb + r];
  int64_t p = p0;
  for (; p + kBlock <= p1; p += kBlock) {
    if (prefetch) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(wj + (kJb + r) * ldw + p), _MM_HINT_T1);
    }
    dot_block<G, R>(xd + p, kp, wj + p, ldw, ~__mmask32(0), acc);
  }
  if (p < p1) {  // last, partial block of k: masked loads (x is zero padded)
    const __mmask32 tail = static_cast<__mmask32>((uint64_t{1} << (k - p)) - 1);
    dot_block<G, R>(xd + p, kp, wj + p, ldw, tail, acc);
  }
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) sums[i * kJb + r] = acc[i][r];
}

// All m rows of x against R W rows over one K chunk, kGemvGroup rows of x per tile.
template <int R>
LATHE_AVX512 void gemv_tiles(int m, int64_t k, int64_t kp, int64_t p0, int64_t p1, const float* xd, const bf16* wj,
                             int64_t ldw, __m512* sums, bool prefetch) {
  for (int i0 = 0; i0 < m; i0 += kGemvGroup) {
    const bool pf = prefetch && i0 == 0;
    const float* xg = xd + i0 * kp;
    __m512* sg = sums + i0 * kJb;
    switch (m - i0 < kGemvGroup ? m - i0 : kGemvGroup) {
      case 1: gemv_tile<1, R>(k, kp, p0, p1, xg, wj, ldw, sg, pf); break;
      case 2: gemv_tile<2, R>(k, kp, p0, p1, xg, wj, ldw, sg, pf); break;
      case 3: gemv_tile<3, R>(k, kp, p0, p1, xg, wj, ldw, sg, pf); break;
      default: gemv_tile<4, R>(k, kp, p0, p1, xg, wj, ldw, sg, pf); break;
    }
  }
}

// m > kGemvGroup rows of x against W rows [j0, j1), block by block.
LATHE_AVX512 void gemv_nt_bf16_tiled(int m, int64_t k, int64_t kp, const float* xd, const bf16* w, int64_t ldw,
                                     int64_t j0, int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  __m512 sums[kGemvMaxM * kJb];
  for (int64_t j = j0; j < j1; j += kJb) {
    const int rows = static_cast<int>(j1 - j < kJb ? j1 - j : kJb);
    const bool prefetch = j + 2 * kJb <= j1;  // the next block is whole
    for (int i = 0; i < m * kJb; ++i) sums[i] = _mm512_setzero_ps();
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t p1 = k - p0 < kKc ? k : p0 + kKc;
      int r = 0;
      for (; r + kRows <= rows; r += kRows) gemv_tiles<kRows>(m, k, kp, p0, p1, xd, w + (j + r) * ldw, ldw, sums + r, prefetch);
      for (; r < rows; ++r) gemv_tiles<1>(m, k, kp, p0, p1, xd, w + (j + r) * ldw, ldw, sums + r, false);
    }
    for (int i = 0; i < m; ++i)
      for (int r = 0; r < rows; ++r) store_y(y + i * ldy + j + r, _mm512_reduce_add_ps(sums[i * kJb + r]), alpha, beta);
  }
}

template <int M>
LATHE_AVX512 void gemv_nt_bf16_m(int64_t k, const float* xd, int64_t kp, const bf16* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  int64_t j = j0;
  for (; j + kRows <= j1; j += kRows)
    gemv_rows<M, kRows>(k, kp, xd, w, ldw, j, y, ldy, alpha, beta, /*prefetch=*/j + 2 * kRows <= j1);
  for (; j < j1; ++j) gemv_rows<M, 1>(k, kp, xd, w, ldw, j, y, ldy, alpha, beta, /*prefetch=*/false);
}

}  // namespace

LATHE_AVX512 void gemv_nt_bf16_avx512(int m, int64_t k, const float* x, const bf16* w, int64_t ldw, int64_t j0,
                                      int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  // x reordered into a per-thread buffer that only grows (no allocation per decode step once warm),
  // 64-byte aligned for the aligned loads of x.
  const int64_t kp = (k + kBlock - 1) / kBlock * kBlock;
  thread_local std::unique_ptr<float[]> buffer;
  thread_local int64_t buffer_floats = 0;
  if (m * kp + 16 > buffer_floats) {
    buffer_floats = m * kp + 16;
    buffer.reset(new float[buffer_floats]);
  }
  float* xd = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer.get()) + 63) & ~uintptr_t{63});
  deinterleave_x(m, k, kp, x, xd);
  switch (m) {
    case 1: return gemv_nt_bf16_m<1>(k, xd, kp, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 2: return gemv_nt_bf16_m<2>(k, xd, kp, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 3: return gemv_nt_bf16_m<3>(k, xd, kp, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 4: return gemv_nt_bf16_m<4>(k, xd, kp, w, ldw, j0, j1, y, ldy, alpha, beta);
    default: return gemv_nt_bf16_tiled(m, k, kp, xd, w, ldw, j0, j1, y, ldy, alpha, beta);
  }
}

}  // namespace lathe::cpu
