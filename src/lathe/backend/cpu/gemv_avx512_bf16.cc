// AVX-512 BF16 skinny-M (decode GEMV) kernel for bf16 x and bf16 W [N, K]: y[i, j] = alpha * x_i · W[j] +
// beta * y[i, j] for m <= kGemvDotMaxM rows of x, by vdpbf16ps. A 64-byte load of a W row holds 16 (even, odd)
// pairs along k and the same load of an x row the matching pairs, so one instruction adds 32 products into
// 16 f32 lanes: twice the multiply-adds of an f32 FMA, with no widening of W nor f32 copy of x (what the
// f32-x kernel of gemv_avx512.cc needs). As there ("nt"; its header has the measurements behind the prefetch):
//  - m <= kPassMaxM: one pass over K with the m x R sums and x's step in registers (x takes one register per
//    row here, not two), requesting the same line of the W rows kAheadRows on into L2;
//  - larger m: that pass for each kPassMaxM rows of x in turn, one block of W rows (about kBlockBytes) at a
//    time, so that every pass but the first reads the block from L2: W comes from memory once, and no packing.
// Every output is one 16-lane accumulator over k in increasing 32-wide steps (the last one masked: lanes past
// k load as zero in both x and W, so what lies past a row, even NaN, never enters), then reduced four at a
// time by one fixed tree (reduce4) and scaled in a vector: the result depends neither on m, nor on the tile
// shape, nor on [j0, j1). At K = 768 an output takes 24 vdpbf16ps, and a _mm512_reduce_add_ps plus a scalar
// store per output cost about a third as much again.
// vdpbf16ps treats bf16 subnormals as zero and flushes subnormal sums (DAZ/FTZ whatever MXCSR says), as the
// blocked bf16 path (gemm_avx512.cc) does; products of normal bf16 are exact in f32.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

constexpr int64_t kStep = 32;  // k per step: one 64-byte line of a bf16 row
constexpr int kPassMaxM = 8;   // rows of x per pass over W: the m x R sums and x's step fill the registers
// W bytes per block of two passes (m > kPassMaxM): a quarter of a 1 MiB L2. Against gemv_avx512.cc's K-chunked
// 4 x 4 tiles, two passes ran m = 12 and 16 1.3-1.7x faster at N = 768 / 2048, K = 768 / 2048 on Zen 5 (same
// run, noisy host); 128 KiB was slower, 512 KiB level.
constexpr int64_t kBlockBytes = int64_t{256} << 10;

LATHE_AVX512_BF16 inline __mmask32 step_mask(int64_t valid) {  // the first `valid` (<= kStep) columns
  return valid >= kStep ? ~__mmask32{0} : static_cast<__mmask32>((uint32_t{1} << valid) - 1);
}

// An empty asm that "modifies" v, so that GCC keeps x's step in a register for all R rows of W instead of
// reloading it from L1 as an operand of every vdpbf16ps (gemv_avx512.cc's keep_in_register, which measured
// load-bound without it).
LATHE_AVX512_BF16 inline void keep_in_register(__m512i& v) { __asm__("" : "+v"(v)); }

// The lane sums of a, b, c, d as lanes 0..3, by one tree whatever the other three vectors are: lanes l and
// l + 8 (two 256-bit halves), then l and l + 4, l and l + 2, l and l + 1. Two vectors at a time go through
// each level: 14 instructions per 4 outputs instead of about 8 per output.
LATHE_AVX512_BF16 inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // 128-bit lanes: a's lanes l + (l + 8) for l < 4, then for 4 <= l < 8, then b's likewise.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
  // 128-bit lane q: vector q's 4 partial sums.
  const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
  const __m512 t = _mm512_add_ps(s, _mm512_shuffle_ps(s, s, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 u = _mm512_add_ps(t, _mm512_shuffle_ps(t, t, _MM_SHUFFLE(1, 1, 1, 1)));
  const __m512i lane0_of_each_128 = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(lane0_of_each_128, u));
}

// y[0, n) = alpha * v + beta * y (beta == 0: y is not read), n <= 16: the same instructions for every lane, so
// an output's bits do not depend on n.
LATHE_AVX512_BF16 inline void store_y(float* y, const float* v, int n, float alpha, float beta) {
  const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1);
  __m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, v), _mm512_set1_ps(alpha));
  if (beta != 0.f) r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, y), _mm512_set1_ps(beta), r);
  _mm512_mask_storeu_ps(y, mask, r);
}

// out[i * R + r] = lane sum of acc[i][r], for the M x R sums of a one-pass tile.
template <int M, int R>
LATHE_AVX512_BF16 inline void reduce_tile(const __m512 (&acc)[M][R], float* out) {
  constexpr int kN = M * R;
  const auto at = [&](int e) { return e < kN ? acc[e / R][e % R] : _mm512_setzero_ps(); };
#pragma GCC unroll 16
  for (int e = 0; e < kN; e += 4) _mm_store_ps(out + e, reduce4(at(e), at(e + 1), at(e + 2), at(e + 3)));
}

// acc[i][r] += pair sums of x_i · W[row r] over one step: the columns of mask (both loads zero the others).
// x rows ldx apart, W rows ldw apart, both at the step's column.
template <int M, int R>
LATHE_AVX512_BF16 inline void dot_step(const bf16* x, int64_t ldx, const bf16* w, int64_t ldw, __mmask32 mask,
                                       __m512 (&acc)[M][R]) {
  __m512i xv[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    xv[i] = _mm512_maskz_loadu_epi16(mask, x + i * ldx);
    if constexpr (M * R + M + 1 <= 32) keep_in_register(xv[i]);  // the sums, x and one W line: 32 zmm
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(mask, w + r * ldw);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], (__m512bh)xv[i], wv);
  }
}

// How far ahead the one-pass path prefetches, into L2: kGemvPrefetchTiles tiles of 4 rows (gemm_internal.h),
// whole tiles of R rows. Ahead into L1, one tile of 2 rows left m = 8 at ~75% of m = 4's weight bandwidth;
// two tiles ran 1.3-1.4x faster at N = 768 and 2048, K = 768 on Zen 5 (noisy host, same run).
template <int R>
constexpr int kAheadRows = (4 * kGemvPrefetchTiles + R - 1) / R * R;

// m <= kPassMaxM: W rows [j, j + R) (wj) against all M rows of x in one pass over K, the sums in registers.
// With prefetch, each step also requests the same line of the R rows kAheadRows<R> on into L2.
template <int M, int R>
LATHE_AVX512_BF16 void gemv_rows(int64_t k, const bf16* x, int64_t ldx, const bf16* wj, int64_t ldw, float* yj,
                                 int64_t ldy, float alpha, float beta, bool prefetch) {
  __m512 acc[M][R];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  const int64_t k_main = k / kStep * kStep;
  int64_t p = 0;
  if (prefetch) {
    const bf16* ahead = wj + kAheadRows<R> * ldw;
    for (; p < k_main; p += kStep) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(ahead + r * ldw + p), _MM_HINT_T1);
      dot_step<M, R>(x + p, ldx, wj + p, ldw, step_mask(kStep), acc);
    }
  }
  for (; p < k_main; p += kStep) dot_step<M, R>(x + p, ldx, wj + p, ldw, step_mask(kStep), acc);
  if (k_main < k) dot_step<M, R>(x + k_main, ldx, wj + k_main, ldw, step_mask(k - k_main), acc);
  alignas(16) float out[(M * R + 3) / 4 * 4];
  reduce_tile<M, R>(acc, out);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) store_y(yj + i * ldy, out + i * R, R, alpha, beta);
}

// W rows per tile of the one-pass path: as many as keep M * R sums, M x vectors and a W line in the 32
// registers (m = 8: 16 + 8 + 1).
template <int M>
constexpr int kPassRows = M <= 5 ? 4 : M <= 7 ? 3 : 2;

template <int M>
LATHE_AVX512_BF16 void gemv_nt_m(int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  constexpr int R = kPassRows<M>;
  int64_t j = j0;
  for (; j + R <= j1; j += R)
    gemv_rows<M, R>(k, x, ldx, w + j * ldw, ldw, y + j, ldy, alpha, beta, /*prefetch=*/j + kAheadRows<R> + R <= j1);
  for (; j < j1; ++j) gemv_rows<M, 1>(k, x, ldx, w + j * ldw, ldw, y + j, ldy, alpha, beta, /*prefetch=*/false);
}

// One pass (m <= kPassMaxM) over W rows [j0, j1).
LATHE_AVX512_BF16 void gemv_nt_pass(int m, int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw,
                                    int64_t j0, int64_t j1, float* y, int64_t ldy, float alpha, float beta) {
  static_assert(kPassMaxM == 8, "one case per m of the one-pass path");
  switch (m) {
    case 1: return gemv_nt_m<1>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 2: return gemv_nt_m<2>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 3: return gemv_nt_m<3>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 4: return gemv_nt_m<4>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 5: return gemv_nt_m<5>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 6: return gemv_nt_m<6>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    case 7: return gemv_nt_m<7>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
    default: return gemv_nt_m<8>(k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
  }
}

}  // namespace

LATHE_AVX512_BF16 void gemv_nt_dot_bf16_avx512bf16(int m, int64_t k, const bf16* x, int64_t ldx, const bf16* w,
                                                    int64_t ldw, int64_t j0, int64_t j1, float* y, int64_t ldy,
                                                    float alpha, float beta) {
  if (m <= kPassMaxM) return gemv_nt_pass(m, k, x, ldx, w, ldw, j0, j1, y, ldy, alpha, beta);
  // Rows per block: whole 2-row tiles of the first pass, at least one.
  const int64_t block_rows = std::max<int64_t>(2, kBlockBytes / (k * static_cast<int64_t>(sizeof(bf16))) / 2 * 2);
  for (int64_t jb = j0; jb < j1; jb += block_rows) {
    const int64_t je = std::min(j1, jb + block_rows);
    for (int i0 = 0; i0 < m; i0 += kPassMaxM)  // after the first pass the block comes from L2
      gemv_nt_pass(std::min(kPassMaxM, m - i0), k, x + i0 * ldx, ldx, w, ldw, jb, je, y + i0 * ldy, ldy, alpha, beta);
  }
}

}  // namespace lathe::cpu
