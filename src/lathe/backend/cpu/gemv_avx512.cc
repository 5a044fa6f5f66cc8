// AVX-512 skinny-M (decode GEMV) kernels: y[i, j] = alpha * x_i · W(:, j) + beta * y[i, j] for
// m <= kGemvMaxM rows of x (kGemvPassMaxM for f32 / f16 W with k <= kGemvPassMaxK). Decode is bound by how fast W streams from DRAM, so:
//  - "nt" (W [N, K], a Linear weight) sums 4 W rows at once and prefetches the rows kGemvPrefetchTiles
//    tiles on into L2 while it does: rows of Llama shapes are 3-8 KiB (about a page each), where the
//    hardware prefetcher restarts on every row and leaves too few lines in flight (measured on bf16, the
//    next 4 rows into L1: 77% -> 88% of a read-only probe over a Llama-1B token's weights; into L2 three
//    tiles on, gemm_internal.h; f32 110M, 1 thread: see docs/benchmarks.md);
//  - one step is one 64-byte line of each W row: 16 f32, or 32 bf16 widened at one ALU op per 16 weights:
//    a 64-byte load holds 16 (even, odd) pairs per 32-bit lane; `<< 16` gives the even weights as f32 and
//    `& 0xffff0000` the odd ones, so x is reordered once per call to match (per 32 columns: the 16 even
//    entries, then the 16 odd ones); 32 f16 widen with vcvtph2ps, 16 at a time and in order (x as given);
//  - m = 5..8: the same single pass with 2 W rows per tile (m = 8 only where its x rows fit in L1);
//  - f32 and f16 W with k <= kGemvPassMaxK, m up to kGemvPassMaxM: that pass for each 8 rows of x in turn over
//    an L2-sized block of W rows (gemv_nt_passes);
//  - else, m >= 8: a block of kJb W rows is summed one K chunk (kKc) at a time, so the chunk of x and of W
//    stays in L1 while every (group of x rows, 4 W rows) tile runs over it; partial sums round-trip through
//    `sums` exactly, so the result is bit for bit that of one pass over K.
// Every "nt" output is one 16-lane accumulator summed over k in increasing steps (the last one masked),
// then reduced by _mm512_reduce_add_ps: the result does not depend on m, on the tile shape nor on [j0, j1).
// Products and sums stay in f32 (bf16 -> f32 and f16 -> f32 are exact).
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "lathe/backend/cpu/avx512_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

constexpr int kRows = 4;       // W rows per tile (4 x kGemvGroup accumulators)
constexpr int kJb = 8;         // W rows per block of the tiled path (m >= 8)
// K chunk of the tiled path, a multiple of both steps: x's chunk (16-32 KiB at m = 8-16) and W's (8 KiB)
// stay in a 48 KiB L1d. 512 rather than 256 measured faster at m = 8 and 16 on Zen 5 in one window and level
// in another (docs/benchmarks.md, 2026-12-03); 1024 no better.
constexpr int64_t kKc = 512;
// Rows of x per pass of the multi-pass path (f32 and f16 W, k <= kGemvPassMaxK): the m x 2 sums, x's step and
// a W line fill the registers (8 + 16 + 1).
constexpr int kPassMaxM = 8;
// W bytes per block of that path's passes: a quarter of a 1 MiB L2, as the bf16 dot kernel's
// (gemv_avx512_bf16.cc); every pass but the first reads the block from L2.
constexpr int64_t kPassBlockBytes = int64_t{256} << 10;

// Columns of k per step: one 64-byte line of a W row.
template <class TW>
constexpr int64_t kStep = 64 / static_cast<int64_t>(sizeof(TW));
// Lane mask of one step's W load: 16 f32, or 32 bf16 / f16.
template <class TW>
using StepMask = std::conditional_t<std::is_same_v<TW, float>, __mmask16, __mmask32>;

template <class TW>
StepMask<TW> tail_mask(int64_t left) {  // the first `left` (< kStep) columns of a step
  return static_cast<StepMask<TW>>((uint64_t{1} << left) - 1);
}

// An empty asm that "modifies" v: GCC then keeps x's step vectors in registers for all R rows of W,
// instead of folding a reload of x into every FMA (40 loads per 32 FMAs at M = 4: load-bound; 12 with
// this; bf16 M = 4 from DRAM went from 2.43 to 1.43 ms on Zen 5).
LATHE_AVX512 inline void keep_in_register(__m512& v) { __asm__("" : "+v"(v)); }

LATHE_AVX512 inline void store_y(float* y, float v, float alpha, float beta) {
  *y = beta == 0.f ? alpha * v : alpha * v + beta * *y;
}

// acc[i][r] += x_i · W[row r] over one step; x rows ldx apart, W rows ldw apart (both at the step's
// column). f32 and f16: x is the caller's, in column order (masked like W), W widened 16 at a time by
// load_f32x16 (f16: two halves); bf16 (below): x is the reordered, zero-padded, aligned copy.
template <int M, int R, class TW>
  requires(!std::is_same_v<TW, bf16>)
LATHE_AVX512 inline void dot_step(const float* x, int64_t ldx, const TW* w, int64_t ldw, StepMask<TW> mask,
                                  __m512 (&acc)[M][R]) {
#pragma GCC unroll 2
  for (int64_t h = 0; h < kStep<TW>; h += 16) {
    const __mmask16 part = static_cast<__mmask16>(mask >> h);
    __m512 xv[M];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      xv[i] = _mm512_maskz_loadu_ps(part, x + i * ldx + h);
      if constexpr (M + M * R + 2 <= 32) keep_in_register(xv[i]);  // x, the sums, W and its mask: 32 zmm
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wv = avx512::load_f32x16(w + r * ldw + h, part);
#pragma GCC unroll 8
      for (int i = 0; i < M; ++i) acc[i][r] = _mm512_fmadd_ps(xv[i], wv, acc[i][r]);
    }
  }
}

template <int M, int R>
LATHE_AVX512 inline void dot_step(const float* xd, int64_t ldx, const bf16* w, int64_t ldw, __mmask32 mask,
                                  __m512 (&acc)[M][R]) {
  const __m512i odd_bits = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 xe[M], xo[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    xe[i] = _mm512_load_ps(xd + i * ldx);
    xo[i] = _mm512_load_ps(xd + i * ldx + 16);
    if constexpr (2 * M + M * R + 3 <= 32) {  // else x stays in L1, an operand of each FMA
      keep_in_register(xe[i]);
      keep_in_register(xo[i]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512i v = _mm512_maskz_loadu_epi16(mask, w + r * ldw);
    const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(v, odd_bits));
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) acc[i][r] = _mm512_fmadd_ps(xo[i], wo, _mm512_fmadd_ps(xe[i], we, acc[i][r]));
  }
}

// m <= 7: rows [j, j + R) of W (wj) against all M rows of x in one pass over K, the sums in
// registers. With prefetch, each step also requests the same line of the rows kGemvPrefetchTiles tiles on
// into L2 (gemm_internal.h).
template <class TW, int M, int R>
LATHE_AVX512 void gemv_rows(int64_t k, const float* x, int64_t ldx, const TW* wj, int64_t ldw, float* yj,
                            int64_t ldy, float alpha, float beta, bool prefetch) {
  constexpr int64_t S = kStep<TW>;
  __m512 acc[M][R];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  const int64_t k_main = k / S * S;
  int64_t p = 0;
  if (prefetch) {
    const TW* ahead = wj + kGemvPrefetchTiles * R * ldw;
    for (; p < k_main; p += S) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * ldw + p), _MM_HINT_T1);
      dot_step<M, R>(x + p, ldx, wj + p, ldw, static_cast<StepMask<TW>>(~uint64_t{0}), acc);
    }
  }
  for (; p < k_main; p += S) dot_step<M, R>(x + p, ldx, wj + p, ldw, static_cast<StepMask<TW>>(~uint64_t{0}), acc);
  if (k_main < k) dot_step<M, R>(x + k_main, ldx, wj + k_main, ldw, tail_mask<TW>(k - k_main), acc);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) store_y(yj + i * ldy + r, _mm512_reduce_add_ps(acc[i][r]), alpha, beta);
}

// W rows per tile of the one-pass path: 4, or 2 for m = 5..7 so that the m x R sums and x's step stay in
// registers (m = 5: 1.05-1.18x the tiled path from DRAM on Zen 5). From m = 8 on, x no longer fits beside
// the sums and is re-read for every FMA: the tiled path was 1.2-1.4x faster there.
template <int M>
constexpr int kPassRows = M <= kGemvGroup ? kRows : 2;

template <class TW, int M>
LATHE_AVX512 void gemv_nt_m(int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0, int64_t j1,
                            float* y, int64_t ldy, float alpha, float beta) {
  int64_t j = j0;
  for (; j + kPassRows<M> <= j1; j += kPassRows<M>)
    gemv_rows<TW, M, kPassRows<M>>(k, x, ldx, w + j * ldw, ldw, y + j, ldy, alpha, beta,
                                   /*prefetch=*/j + (kGemvPrefetchTiles + 1) * kPassRows<M> <= j1);
  for (; j < j1; ++j) gemv_rows<TW, M, 1>(k, x, ldx, w + j * ldw, ldw, y + j, ldy, alpha, beta, /*prefetch=*/false);
}

// m >= 8. Re-reading a block of W rows for each group of x rows over all of K read the x rows
// (M x K) from L2 once per 4 W rows, which bound M = 16 at 1/3 of the FMA rate; hence the K chunks.
// sums[i * kJb + r] (G x R tile at the group's first x row and the tile's first W row) += lanes of
// x_i · W[r] over k [p0, p1). With prefetch (the first group of x rows), each step also requests the same
// line of the next block's rows (kJb rows on) into L2, so the DRAM does not sit idle while the other
// groups run from L1 (without it M = 5 took 2x M = 4).
template <class TW, int G, int R>
LATHE_AVX512 void gemv_tile(int64_t k, int64_t p0, int64_t p1, const float* x, int64_t ldx, const TW* wj, int64_t ldw,
                            __m512* sums, bool prefetch) {
  constexpr int64_t S = kStep<TW>;
  __m512 acc[G][R];
#pragma GCC unroll 8
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = sums[i * kJb + r];
  int64_t p = p0;
  for (; p + S <= p1; p += S) {
    if (prefetch) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(wj + (kJb + r) * ldw + p), _MM_HINT_T1);
    }
    dot_step<G, R>(x + p, ldx, wj + p, ldw, static_cast<StepMask<TW>>(~uint64_t{0}), acc);
  }
  if (p < p1) dot_step<G, R>(x + p, ldx, wj + p, ldw, tail_mask<TW>(k - p), acc);  // last, partial step
#pragma GCC unroll 8
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sums[i * kJb + r] = acc[i][r];
}

// All m rows of x against R W rows over one K chunk, kGemvGroup rows of x per tile.
template <class TW, int R>
LATHE_AVX512 void gemv_tiles(int m, int64_t k, int64_t p0, int64_t p1, const float* x, int64_t ldx, const TW* wj,
                             int64_t ldw, __m512* sums, bool prefetch) {
  for (int i0 = 0; i0 < m; i0 += kGemvGroup) {
    const bool pf = prefetch && i0 == 0;
    const float* xg = x + i0 * ldx;
    __m512* sg = sums + i0 * kJb;
    switch (m - i0 < kGemvGroup ? m - i0 : kGemvGroup) {
      case 1: gemv_tile<TW, 1, R>(k, p0, p1, xg, ldx, wj, ldw, sg, pf); break;
      case 2: gemv_tile<TW, 2, R>(k, p0, p1, xg, ldx, wj, ldw, sg, pf); break;
      case 3: gemv_tile<TW, 3, R>(k, p0, p1, xg, ldx, wj, ldw, sg, pf); break;
      default: gemv_tile<TW, 4, R>(k, p0, p1, xg, ldx, wj, ldw, sg, pf); break;
    }
  }
}

template <class TW>
LATHE_AVX512 void gemv_nt_tiled(int m, int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0,
                                int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  __m512 sums[kGemvMaxM * kJb];  // [m][kJb] partial sums of one block of W rows
  for (int64_t j = j0; j < j1; j += kJb) {
    const int rows = static_cast<int>(j1 - j < kJb ? j1 - j : kJb);
    const bool prefetch = j + 2 * kJb <= j1;  // the next block is whole
    for (int i = 0; i < m * kJb; ++i) sums[i] = _mm512_setzero_ps();
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t p1 = k - p0 < kKc ? k : p0 + kKc;
      int r = 0;
      for (; r + kRows <= rows; r += kRows)
        gemv_tiles<TW, kRows>(m, k, p0, p1, x, ldx, w + (j + r) * ldw, ldw, sums + r, prefetch);
      for (; r < rows; ++r) gemv_tiles<TW, 1>(m, k, p0, p1, x, ldx, w + (j + r) * ldw, ldw, sums + r, false);
    }
    for (int i = 0; i < m; ++i)
      for (int r = 0; r < rows; ++r) store_y(y + i * ldy + j + r, _mm512_reduce_add_ps(sums[i * kJb + r]), alpha, beta);
  }
}

// One pass over W rows [j0, j1) for m <= kPassMaxM rows of x.
template <class TW>
LATHE_AVX512 void gemv_nt_pass(int m, int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0,
                               int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  static_assert(kPassMaxM == 8, "one case per m of the one-pass path");
  switch (m) {
    case 1: return gemv_nt_m<TW, 1>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 2: return gemv_nt_m<TW, 2>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 3: return gemv_nt_m<TW, 3>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 4: return gemv_nt_m<TW, 4>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 5: return gemv_nt_m<TW, 5>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 6: return gemv_nt_m<TW, 6>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 7: return gemv_nt_m<TW, 7>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    default: return gemv_nt_m<TW, 8>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
  }
}

// m > kPassMaxM, k <= kGemvPassMaxK: the one-pass path for each kPassMaxM rows of x in turn, one block of W rows
// (about kPassBlockBytes) at a time, so that W comes from memory once with no packing. x's rows of one pass
// (8 x 4 KiB at most) stay in L1, which the one-pass path at larger k would overflow (hence the tiled path
// there). Against the tiled path (m 12, 16) and the blocked GEMM (m 24-48) on Zen 5, from DRAM, N 768 / 2048 /
// 50257, K 768 (gemm_bench BM_Decode_F32): 1.1-1.7x, level at m = 48 (docs/benchmarks.md, 2026-12-03 17:00).
template <class TW>
LATHE_AVX512 void gemv_nt_passes(int m, int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  // Rows per block: whole 4-row tiles of the first pass, at least one.
  const int64_t block_rows = std::max<int64_t>(4, kPassBlockBytes / (k * static_cast<int64_t>(sizeof(TW))) / 4 * 4);
  for (int64_t jb = j0; jb < j1; jb += block_rows) {
    const int64_t je = std::min(j1, jb + block_rows);
    for (int i0 = 0; i0 < m; i0 += kPassMaxM)
      gemv_nt_pass<TW>(std::min(kPassMaxM, m - i0), k, x + i0 * ldx, ldx, w, ldw, jb, je, y + i0 * ldy, ldy, alpha,
                       beta);
  }
}

// m <= kPassMaxM: one pass; larger m: passes over L2 blocks where k <= kGemvPassMaxK (f32, f16 W), else (and
// for bf16 W, whose widened x takes two registers per row) the K-chunked tiles, m <= kGemvMaxM.
template <class TW>
LATHE_AVX512 void gemv_nt(int m, int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0,
                          int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  constexpr bool kPasses = !std::is_same_v<TW, bf16>;
  if (m <= 7 || (kPasses && m == kPassMaxM && k <= kGemvPassMaxK))
    return gemv_nt_pass<TW>(m, k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
  if (kPasses && k <= kGemvPassMaxK) return gemv_nt_passes<TW>(m, k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
  gemv_nt_tiled<TW>(m, k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
}

// xd [m][kp] (kp = k rounded up to 32) = x [m][k] reordered per 32 columns into (16 evens, 16 odds), zero
// padded: the order in which dot_step widens a 64-byte load of bf16.
void deinterleave_x(int m, int64_t k, int64_t kp, const float* x, float* xd) {
  for (int i = 0; i < m; ++i)
    for (int64_t p = 0; p < kp; p += 32)
      for (int64_t l = 0; l < 16; ++l) {
        const int64_t even = p + 2 * l, odd = even + 1;
        xd[i * kp + p + l] = even < k ? x[i * k + even] : 0.f;
        xd[i * kp + p + 16 + l] = odd < k ? x[i * k + odd] : 0.f;
      }
}

}  // namespace

LATHE_AVX512 void gemv_nt_f32_avx512(int m, int64_t k, const float* x, const float* w, int64_t ldw, int64_t j0,
                                     int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  gemv_nt<float>(m, k, x, k, w, ldw, j0, j1, y, ldy, alpha, beta);
}

LATHE_AVX512 void gemv_nt_bf16_avx512(int m, int64_t k, const float* x, const bf16* w, int64_t ldw, int64_t j0,
                                      int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  // x reordered into a per-thread buffer that only grows (no allocation per decode step once warm),
  // 64-byte aligned for the aligned loads of x.
  const int64_t kp = (k + 31) / 32 * 32;
  thread_local std::unique_ptr<float[]> buffer;
  thread_local int64_t buffer_floats = 0;
  if (m * kp + 16 > buffer_floats) {
    buffer_floats = m * kp + 16;
    buffer.reset(new float[buffer_floats]);
  }
  float* xd = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer.get()) + 63) & ~uintptr_t{63});
  deinterleave_x(m, k, kp, x, xd);
  gemv_nt<bf16>(m, k, xd, kp, w, ldw, j0, j1, y, ldy, alpha, beta);
}

LATHE_AVX512 void gemv_nt_f16_avx512(int m, int64_t k, const float* x, const f16* w, int64_t ldw, int64_t j0,
                                     int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  gemv_nt<f16>(m, k, x, k, w, ldw, j0, j1, y, ldy, alpha, beta);
}

}  // namespace lathe::cpu
