// AVX2 + FMA skinny-M (decode GEMV) kernels: y[i, j] = alpha * x_i · W(:, j) + beta * y[i, j] for
// m <= kGemvMaxM rows of x. Decode at batch 1 is bound by how fast W streams from DRAM, so:
//  - "nt" (W [N, K], a Linear weight) sums 4 W rows at once (4 independent FMA chains for m = 1, where one
//    chain per output was bound by the FMA latency) and prefetches the rows that come next:
//    rows of Llama shapes are 4-8 KiB (a page each), where the hardware prefetcher restarts every row;
//  - bf16 weights widen with shifts: a 32-byte load holds 16 bf16, i.e. 8 (even, odd) pairs per 32-bit
//    lane; `<< 16` gives the even weights as f32 and `& 0xffff0000` the odd ones, so x is reordered once per
//    call to match (per 16 columns: the 8 even entries, then the 8 odd ones). Two ALU ops per 16 weights.
//  - f16 weights widen with F16C's vcvtph2ps (8 at a time, in order, exact): x is used as given.
//  - m > kGroup: a block of kJb W rows is summed one K chunk (kKc) at a time, so the chunk of W (and of x)
//    stays in L1 while every (group of x rows, 4 W rows) tile runs over it; partial sums round-trip through
//    `sums` exactly, so the result is bit for bit that of one pass over K.
// One step is 32 bytes of each W row (8 f32, 16 bf16 or 16 f16). Every output is one 8-lane accumulator
// summed over k in increasing steps (the last step zero padded), then reduced in a fixed order: the result
// does not depend on m, on the tile shape nor on [j0, j1).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

constexpr int kGroup = 2;       // rows of x per tile: 2 x 4 accumulators + x + W fit the 16 ymm registers
constexpr int kRows = 4;        // W rows per tile
constexpr int kJb = 8;          // W rows per block (the prefetch runs one block ahead)
constexpr int64_t kKc = 256;    // K chunk of the tiled path (m > kGroup): 8 rows x 256 x 4 B = 8 KiB of W
constexpr int64_t kLine = 64;   // bytes per cache line (one prefetch per line and row)

// An empty asm that "modifies" v: GCC then keeps x's step vectors in registers for all R rows of W,
// instead of folding a reload of x into every FMA (load-bound at G x R FMAs per step).
LATHE_AVX2 inline void keep_in_register(__m256& v) { __asm__("" : "+x"(v)); }

// Elements of W per step: 32 bytes of a row, i.e. 8 f32 (one ymm), or 16 bf16 / f16 (two ymm of f32).
template <class TW>
constexpr int64_t kStep = 32 / static_cast<int64_t>(sizeof(TW));

// acc[i][r] += x_i · W[row r] over one step; x rows ldx apart, W rows ldw apart (at the step's column).
// f32 and f16 (x in column order, W widened 8 at a time by load_f32x8; f16: two halves).
template <int G, int R, class TW>
  requires(!std::is_same_v<TW, bf16>)
LATHE_AVX2 inline void dot_step(const float* x, int64_t ldx, const TW* w, int64_t ldw, __m256 (&acc)[G][R]) {
#pragma GCC unroll 2
  for (int64_t h = 0; h < kStep<TW>; h += 8) {
    __m256 xv[G];
#pragma GCC unroll 4
    for (int i = 0; i < G; ++i) {
      xv[i] = _mm256_loadu_ps(x + i * ldx + h);
      keep_in_register(xv[i]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 wv = avx2::load_f32x8(w + r * ldw + h);
#pragma GCC unroll 4
      for (int i = 0; i < G; ++i) acc[i][r] = _mm256_fmadd_ps(xv[i], wv, acc[i][r]);
    }
  }
}

// Same on 16 bf16 weights; x is reordered (8 even columns, then 8 odd ones).
template <int G, int R>
LATHE_AVX2 inline void dot_step(const float* x, int64_t ldx, const bf16* w, int64_t ldw, __m256 (&acc)[G][R]) {
  const __m256i odd_bits = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 xe[G], xo[G];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i) {
    xe[i] = _mm256_loadu_ps(x + i * ldx);
    xo[i] = _mm256_loadu_ps(x + i * ldx + 8);
    keep_in_register(xe[i]);
    keep_in_register(xo[i]);
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * ldw));
    const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(v, odd_bits));
#pragma GCC unroll 4
    for (int i = 0; i < G; ++i) acc[i][r] = _mm256_fmadd_ps(xo[i], wo, _mm256_fmadd_ps(xe[i], we, acc[i][r]));
  }
}

// The last, partial step (k - p < kStep columns left): W and x copied into zero-padded buffers, then the
// same dot_step. x of bf16 weights is already zero padded to a whole step (the reordered copy); x of f32
// and f16 weights is the caller's.
template <class TW, int G, int R>
LATHE_AVX2 void dot_tail(const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t left, __m256 (&acc)[G][R]) {
  constexpr int64_t S = kStep<TW>;
  alignas(32) TW wt[R][S];
  alignas(32) float xt[G][S];
  std::memset(static_cast<void*>(wt), 0, sizeof(wt));
  std::memset(xt, 0, sizeof(xt));
  for (int r = 0; r < R; ++r) std::memcpy(wt[r], w + r * ldw, static_cast<size_t>(left) * sizeof(TW));
  const int64_t x_valid = std::is_same_v<TW, bf16> ? S : left;
  for (int i = 0; i < G; ++i) std::memcpy(xt[i], x + i * ldx, static_cast<size_t>(x_valid) * sizeof(float));
  dot_step<G, R>(&xt[0][0], S, &wt[0][0], S, acc);
}

// sums[i * kJb + r] (G x R tile at the group's first x row and the tile's first W row) += lanes of
// x_i · W[r] over columns [p0, p1) of k. With prefetch (pf_rows > 0), each cache line of the R rows is
// matched by a request for the same line pf_rows rows below: the next tile into L1 when one pass covers K
// (measured on Llama-1B bf16, 1 thread: 4.7 tok/s, against 4.1-4.6 for the next block into L2), the next
// block into L2 when K goes in chunks (the block's rows are read again from L1 by the other groups).
template <class TW, int G, int R>
LATHE_AVX2 void gemv_tile(int64_t k, int64_t p0, int64_t p1, const float* x, int64_t ldx, const TW* w, int64_t ldw,
                          __m256* sums, int pf_rows) {
  constexpr int64_t S = kStep<TW>, kPerLine = kLine / static_cast<int64_t>(sizeof(TW));  // 2 steps a line
  __m256 acc[G][R];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = sums[i * kJb + r];
  int64_t p = p0;
  if (pf_rows > 0) {
    const TW* ahead = w + pf_rows * ldw;
    for (; p + kPerLine <= p1; p += kPerLine) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const char* line = reinterpret_cast<const char*>(ahead + r * ldw + p);
        if (pf_rows == kRows) _mm_prefetch(line, _MM_HINT_T0);
        else _mm_prefetch(line, _MM_HINT_T1);
      }
      dot_step<G, R>(x + p, ldx, w + p, ldw, acc);
      dot_step<G, R>(x + p + S, ldx, w + p + S, ldw, acc);
    }
  }
  for (; p + S <= p1; p += S) dot_step<G, R>(x + p, ldx, w + p, ldw, acc);
  if (p < p1) dot_tail<TW, G, R>(x + p, ldx, w + p, ldw, k - p, acc);
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) sums[i * kJb + r] = acc[i][r];
}

// All m rows of x against R W rows over one K chunk, kGroup rows of x per tile (the first one prefetches).
template <class TW, int R>
LATHE_AVX2 void gemv_tiles(int m, int64_t k, int64_t p0, int64_t p1, const float* x, int64_t ldx, const TW* w,
                           int64_t ldw, __m256* sums, int pf_rows) {
  for (int i0 = 0; i0 < m; i0 += kGroup) {
    const float* xg = x + i0 * ldx;
    __m256* sg = sums + i0 * kJb;
    const int pf = i0 == 0 ? pf_rows : 0;
    if (m - i0 >= 2) gemv_tile<TW, 2, R>(k, p0, p1, xg, ldx, w, ldw, sg, pf);
    else gemv_tile<TW, 1, R>(k, p0, p1, xg, ldx, w, ldw, sg, pf);
  }
}

// W rows [j0, j1) block by block. m <= kGroup: one pass over K per block (the sums stay in registers);
// otherwise K in chunks of kKc so the block's chunk of W is read from L1 by every group.
template <class TW>
LATHE_AVX2 void gemv_nt_blocks(int m, int64_t k, const float* x, int64_t ldx, const TW* w, int64_t ldw, int64_t j0,
                               int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  const int64_t kc = m <= kGroup ? k : kKc;
  // See gemv_tile. f32 rows of one pass over K: no software prefetch. The hardware prefetcher keeps up
  // with 4-byte weights alone, and the requests only cost it: AMD Zen 2, tiny-110M f32 batch-1 decode,
  // 1 thread: 35.7-36.7 tok/s without them, 31.0-32.1 with; bf16 loses a fifth without them (48 -> 38),
  // and batch 8 (the K-chunked path, next block into L2) gains from them in f32 too (257 -> 265 tok/s).
  const int pf_rows = m > kGroup ? kJb : sizeof(TW) == sizeof(float) ? 0 : kRows;
  __m256 sums[kGemvMaxM * kJb];  // [m][kJb] partial sums of one block of W rows
  for (int64_t j = j0; j < j1; j += kJb) {
    const int rows = static_cast<int>(j1 - j < kJb ? j1 - j : kJb);
    const int pf = j + kJb + pf_rows <= j1 ? pf_rows : 0;  // the rows prefetched lie in [j0, j1)
    for (int i = 0; i < m * kJb; ++i) sums[i] = _mm256_setzero_ps();
    for (int64_t p0 = 0; p0 < k; p0 += kc) {
      const int64_t p1 = k - p0 < kc ? k : p0 + kc;
      int r = 0;
      for (; r + kRows <= rows; r += kRows)
        gemv_tiles<TW, kRows>(m, k, p0, p1, x, ldx, w + (j + r) * ldw, ldw, sums + r, pf);
      for (; r < rows; ++r) gemv_tiles<TW, 1>(m, k, p0, p1, x, ldx, w + (j + r) * ldw, ldw, sums + r, 0);
    }
    for (int i = 0; i < m; ++i)
      for (int r = 0; r < rows; ++r) {
        float& out = y[i * ldy + j + r];
        const float s = avx2::hsum(sums[i * kJb + r]);
        out = beta == 0.f ? alpha * s : alpha * s + beta * out;
      }
  }
}

// xd [m][kp] (kp = k rounded up to 16) = x [m][k] reordered per 16 columns into (8 evens, 8 odds), zero
// padded: the order in which dot_step widens a 32-byte load of bf16.
void deinterleave_x(int m, int64_t k, int64_t kp, const float* x, float* xd) {
  for (int i = 0; i < m; ++i)
    for (int64_t p = 0; p < kp; p += 16)
      for (int64_t l = 0; l < 8; ++l) {
        const int64_t even = p + 2 * l, odd = even + 1;
        xd[i * kp + p + l] = even < k ? x[i * k + even] : 0.f;
        xd[i * kp + p + 8 + l] = odd < k ? x[i * k + odd] : 0.f;
      }
}

}  // namespace

LATHE_AVX2 void gemv_nt_f32_avx2(int m, int64_t k, const float* x, const float* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  gemv_nt_blocks<float>(m, k, x, k, w, ldw, j0, j1, y, ldy, alpha, beta);
}

LATHE_AVX2 void gemv_nt_bf16_avx2(int m, int64_t k, const float* x, const bf16* w, int64_t ldw, int64_t j0,
                                  int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  // x reordered into a per-thread buffer that only grows (no allocation per decode step once warm).
  const int64_t kp = (k + 15) / 16 * 16;
  thread_local std::unique_ptr<float[]> buffer;
  thread_local int64_t buffer_floats = 0;
  if (m * kp > buffer_floats) {
    buffer_floats = m * kp;
    buffer.reset(new float[buffer_floats]);
  }
  deinterleave_x(m, k, kp, x, buffer.get());
  gemv_nt_blocks<bf16>(m, k, buffer.get(), kp, w, ldw, j0, j1, y, ldy, alpha, beta);
}

LATHE_AVX2 void gemv_nt_f16_avx2(int m, int64_t k, const float* x, const f16* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  gemv_nt_blocks<f16>(m, k, x, k, w, ldw, j0, j1, y, ldy, alpha, beta);
}

}  // namespace lathe::cpu
