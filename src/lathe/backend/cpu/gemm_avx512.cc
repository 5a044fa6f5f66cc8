// AVX-512 micro-kernels of the CPU gemm: the f32 register-blocked tile (FMA), the bf16-pair tile
// (vdpbf16ps, AVX-512 BF16) and the skinny-M (decode GEMV) kernels. Packing and threading live in gemm.cc.
// Every function carries its target attribute, so this file is correct without -march=native; the
// dispatcher calls it only when the CPU reports the ISA.
// GCC 12 flags the intrinsics' internal _mm512_undefined_*() as (maybe-)uninitialized once inlined
// (GCC PR 105593, fixed in 13); the warning is spurious.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

// f32 tile: MR rows of C x NR = 16 * NV columns. 14 x 32 keeps 28 accumulators + 2 B vectors in the
// 32 zmm registers; per k step 2 B loads + 14 broadcasts feed 28 FMAs (two FMA ports: 14 cycles), so
// the loads (2 per cycle) never bind and an A micro-panel (14 x kc) stays in L1 while B streams from L2.
constexpr int kMr = 14, kNv = 2, kNr = 16 * kNv;

// Lane masks for the n valid columns of a tile, one per 16-wide vector.
template <int NV>
LATHE_AVX512 inline void column_masks(int n, __mmask16* masks) {
  for (int v = 0; v < NV; ++v) {
    const int r = n - 16 * v;
    masks[v] = r >= 16 ? __mmask16(0xffff) : r <= 0 ? __mmask16(0) : __mmask16((1u << r) - 1);
  }
}

// Writes alpha * acc (+ beta * C) for M rows, through the column masks.
template <int M, int NV>
LATHE_AVX512 inline void store_tile(__m512 (&acc)[M][NV], float* c, int64_t ldc, int n, float alpha,
                                    float beta) {
  __mmask16 masks[NV];
  column_masks<NV>(n, masks);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* p = c + i * ldc + 16 * v;
      __m512 r = _mm512_mul_ps(acc[i][v], va);
      if (beta != 0.f) r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(masks[v], p), vb, r);
      _mm512_mask_storeu_ps(p, masks[v], r);
    }
}

// M <= kMr rows are live; the packed A panel keeps its kMr stride (zero rows are simply not computed).
template <int M>
LATHE_AVX512 void ukernel_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int n, float alpha,
                              float beta) {
  // The C tile is M separate pairs of lines that no hardware prefetcher follows: fetch them now so
  // that they have arrived (from L3, ~100 ns) when the tile is stored after the kc loop.
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
  __m512 acc[M][kNv];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[kNv];
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) bv[v] = _mm512_load_ps(b + p * kNr + 16 * v);
    _mm_prefetch(reinterpret_cast<const char*>(b + (p + 8) * kNr), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512 ai = _mm512_set1_ps(a[p * kMr + i]);
#pragma GCC unroll 8
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  store_tile<M, kNv>(acc, c, ldc, n, alpha, beta);
}

template <std::size_t... I>
constexpr auto make_f32_table(std::index_sequence<I...>) {
  using Fn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, float, float);
  return std::array<Fn, sizeof...(I)>{&ukernel_f32<static_cast<int>(I) + 1>...};
}

LATHE_AVX512 void micro_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                            float alpha, float beta) {
  static constexpr auto kTable = make_f32_table(std::make_index_sequence<kMr>());
  kTable[m - 1](kc, a, b, c, ldc, n, alpha, beta);
}

// bf16-pair tile: each 32-bit lane holds (k, k+1); vdpbf16ps adds both products into the f32 lane, so
// one instruction does 32 multiply-adds (twice the f32 FMA rate). Same 14 x 32 register blocking.
template <int M>
LATHE_AVX512_BF16 void ukernel_bf16(int64_t kc2, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int n,
                                    float alpha, float beta) {
  __m512 acc[M][kNv];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int64_t q = 0; q < kc2; ++q) {
    __m512bh bv[kNv];
#pragma GCC unroll 8
    for (int v = 0; v < kNv; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + q * kNr + 16 * v);
    _mm_prefetch(reinterpret_cast<const char*>(b + (q + 8) * kNr), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[q * kMr + i]));
#pragma GCC unroll 8
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
    }
  }
  store_tile<M, kNv>(acc, c, ldc, n, alpha, beta);
}

template <std::size_t... I>
constexpr auto make_bf16_table(std::index_sequence<I...>) {
  using Fn = void (*)(int64_t, const uint32_t*, const uint32_t*, float*, int64_t, int, float, float);
  return std::array<Fn, sizeof...(I)>{&ukernel_bf16<static_cast<int>(I) + 1>...};
}

LATHE_AVX512_BF16 void micro_bf16(int64_t kc2, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m,
                                  int n, float alpha, float beta) {
  static constexpr auto kTable = make_bf16_table(std::make_index_sequence<kMr>());
  kTable[m - 1](kc2, a, b, c, ldc, n, alpha, beta);
}

// ---- Skinny M (decode): bandwidth bound, W is streamed once for all m <= kGemvMaxM rows of x. ----

// 16 weights as f32: plain load, or bf16 widened by a 16-bit shift (bf16 is the top half of an f32).
LATHE_AVX512 inline __m512 load_w(const float* w, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, w); }
LATHE_AVX512 inline __m512 load_w(const bf16* w, __mmask16 mask) {
  const __m256i h = _mm256_maskz_loadu_epi16(mask, w);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

LATHE_AVX512 inline void store_y(float* y, float v, float alpha, float beta) {
  *y = beta == 0.f ? alpha * v : alpha * v + beta * *y;
}

// W [N, K] (trans_b): rows [j, j + R) of W against G rows of x, G x R accumulators (dot products along
// K, reduced at the end): y[i][j + r] = alpha * x_i · W[j + r] + beta * y[i][j + r]. x and y point at the
// group's first row. Each accumulator sums its lane's products in k order whatever G and R are, so a row's
// result does not depend on how many other rows share the call.
template <class TW, int G, int R>
LATHE_AVX512 void gemv_nt_block(int64_t k, const float* x, const TW* w, int64_t ldw, float* y, int64_t ldy,
                                float alpha, float beta) {
  const int64_t k_main = k & ~int64_t{15};
  const __mmask16 tail = static_cast<__mmask16>((1u << (k - k_main)) - 1);
  __m512 acc[G][R];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 16) {  // the last step is masked when 16 does not divide k
    const __mmask16 mask = p < k_main ? __mmask16(0xffff) : tail;
    __m512 xv[G];
#pragma GCC unroll 4
    for (int i = 0; i < G; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, x + i * k + p);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_w(w + r * ldw + p, mask);
#pragma GCC unroll 4
      for (int i = 0; i < G; ++i) acc[i][r] = _mm512_fmadd_ps(xv[i], wv, acc[i][r]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) store_y(y + i * ldy + r, _mm512_reduce_add_ps(acc[i][r]), alpha, beta);
}

// m <= kGemvGroup: rows [j, j + R) of W against all rows of x in one pass over K.
template <class TW, int R>
LATHE_AVX512 void gemv_nt_rows(int m, int64_t k, const float* x, const TW* w, int64_t ldw, float* y, int64_t ldy,
                               float alpha, float beta) {
  switch (m) {
    case 1: return gemv_nt_block<TW, 1, R>(k, x, w, ldw, y, ldy, alpha, beta);
    case 2: return gemv_nt_block<TW, 2, R>(k, x, w, ldw, y, ldy, alpha, beta);
    case 3: return gemv_nt_block<TW, 3, R>(k, x, w, ldw, y, ldy, alpha, beta);
    default: return gemv_nt_block<TW, 4, R>(k, x, w, ldw, y, ldy, alpha, beta);
  }
}

// m > kGemvGroup: tiles. Re-reading a block of W rows for each group of x rows over all of K read the x
// rows (M x K) from L2 once per 4 W rows, which bound M = 16 at 1/3 of the FMA rate. Instead a block of
// kJb W rows is summed one K chunk (kKc) at a time: the chunk of x (M x kKc, <= 16 KiB) and of W stay in
// L1 while every (group, 4-row) tile runs over it, its partial sums kept in `sums`. Chunks are whole
// 16-lane steps and sums round-trip exactly, so the result is bit for bit that of one pass.
constexpr int kJb = 8;
constexpr int64_t kKc = 256;

// sums[i * kJb + r] (G x R tile, at the group's first row and the tile's first W row) += lanes of x_i · W[r]
// over k [p0, p1); the step at k_main is masked when 16 does not divide k.
// With prefetch (the first group of x rows), each step also requests the same columns of the next block's
// rows (kJb rows on), so the DRAM does not sit idle while the other groups run from L1.
template <class TW, int G, int R>
LATHE_AVX512 void gemv_nt_tile(int64_t k, int64_t p0, int64_t p1, const float* x, const TW* w, int64_t ldw,
                               __m512* sums, bool prefetch) {
  const int64_t k_main = k & ~int64_t{15};
  const __mmask16 tail = static_cast<__mmask16>((1u << (k - k_main)) - 1);
  __m512 acc[G][R];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = sums[i * kJb + r];
  for (int64_t p = p0; p < p1; p += 16) {
    if (prefetch && (sizeof(TW) == 4 || p % 32 == 0)) {  // one 64-byte line per row
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(w + (kJb + r) * ldw + p), _MM_HINT_T1);
    }
    const __mmask16 mask = p < k_main ? __mmask16(0xffff) : tail;
    __m512 xv[G];
#pragma GCC unroll 4
    for (int i = 0; i < G; ++i) xv[i] = _mm512_maskz_loadu_ps(mask, x + i * k + p);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_w(w + r * ldw + p, mask);
#pragma GCC unroll 4
      for (int i = 0; i < G; ++i) acc[i][r] = _mm512_fmadd_ps(xv[i], wv, acc[i][r]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) sums[i * kJb + r] = acc[i][r];
}

// All m rows of x against R W rows over one K chunk, kGemvGroup rows of x per tile.
template <class TW, int R>
LATHE_AVX512 void gemv_nt_tiles(int m, int64_t k, int64_t p0, int64_t p1, const float* x, const TW* w, int64_t ldw,
                                __m512* sums, bool prefetch) {
  for (int i0 = 0; i0 < m; i0 += kGemvGroup) {
    const bool pf = prefetch && i0 == 0;
    const float* xg = x + i0 * k;
    __m512* sg = sums + i0 * kJb;
    switch (m - i0 < kGemvGroup ? m - i0 : kGemvGroup) {
      case 1: gemv_nt_tile<TW, 1, R>(k, p0, p1, xg, w, ldw, sg, pf); break;
      case 2: gemv_nt_tile<TW, 2, R>(k, p0, p1, xg, w, ldw, sg, pf); break;
      case 3: gemv_nt_tile<TW, 3, R>(k, p0, p1, xg, w, ldw, sg, pf); break;
      default: gemv_nt_tile<TW, 4, R>(k, p0, p1, xg, w, ldw, sg, pf); break;
    }
  }
}

template <class TW>
LATHE_AVX512 void gemv_nt(int m, int64_t k, const float* x, const TW* w, int64_t ldw, int64_t j0, int64_t j1,
                          float* y, int64_t ldy, float alpha, float beta) {
  constexpr int kRows = 4;  // W rows per tile (4 x 4 accumulators for a full group)
  if (m <= kGemvGroup) {
    int64_t j = j0;
    for (; j + kRows <= j1; j += kRows) gemv_nt_rows<TW, kRows>(m, k, x, w + j * ldw, ldw, y + j, ldy, alpha, beta);
    for (; j < j1; ++j) gemv_nt_rows<TW, 1>(m, k, x, w + j * ldw, ldw, y + j, ldy, alpha, beta);
    return;
  }
  __m512 sums[kGemvMaxM * kJb];  // [m][kJb] partial sums of one block of W rows
  for (int64_t j = j0; j < j1; j += kJb) {
    const int rows = static_cast<int>(j1 - j < kJb ? j1 - j : kJb);
    const bool prefetch = j + 2 * kJb <= j1;  // the next block is whole
    for (int i = 0; i < m * kJb; ++i) sums[i] = _mm512_setzero_ps();
    for (int64_t p0 = 0; p0 < k; p0 += kKc) {
      const int64_t p1 = k - p0 < kKc ? k : p0 + kKc;
      int r = 0;
      for (; r + kRows <= rows; r += kRows) gemv_nt_tiles<TW, kRows>(m, k, p0, p1, x, w + (j + r) * ldw, ldw, sums + r, prefetch);
      for (; r < rows; ++r) gemv_nt_tiles<TW, 1>(m, k, p0, p1, x, w + (j + r) * ldw, ldw, sums + r, false);
    }
    for (int i = 0; i < m; ++i)
      for (int r = 0; r < rows; ++r) store_y(y + i * ldy + j + r, _mm512_reduce_add_ps(sums[i * kJb + r]), alpha, beta);
  }
}

// W [K, N]: y[:, cols] += x[:, p] * W[p, cols] over p, with a column chunk of the sums kept in an L1
// buffer (at most 16 KiB) so each W row is read as one contiguous run (the hardware prefetcher follows it).
// Each sum adds its products in p order, so the chunk width does not change results.
template <class TW, int M>
LATHE_AVX512 void gemv_nn_m(int64_t k, const float* x, const TW* w, int64_t ldw, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, float alpha, float beta) {
  constexpr int64_t kChunk = M <= 4 ? 1024 : 4096 / M / 16 * 16;
  alignas(64) float sums[M][kChunk];
  for (int64_t c0 = j0; c0 < j1; c0 += kChunk) {
    const int64_t nc = j1 - c0 < kChunk ? j1 - c0 : kChunk;
    for (int i = 0; i < M; ++i)
      for (int64_t v = 0; v < nc; v += 16) _mm512_store_ps(&sums[i][v], _mm512_setzero_ps());
    for (int64_t p = 0; p < k; ++p) {
      __m512 xv[M];
      for (int i = 0; i < M; ++i) xv[i] = _mm512_set1_ps(x[i * k + p]);
      const TW* wr = w + p * ldw + c0;
      for (int64_t v = 0; v < nc; v += 16) {
        const int rem = static_cast<int>(nc - v);
        const __mmask16 mask = rem >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << rem) - 1);
        const __m512 wv = load_w(wr + v, mask);
        for (int i = 0; i < M; ++i)
          _mm512_store_ps(&sums[i][v], _mm512_fmadd_ps(xv[i], wv, _mm512_load_ps(&sums[i][v])));
      }
    }
    for (int i = 0; i < M; ++i)
      for (int64_t v = 0; v < nc; ++v) store_y(y + i * ldy + c0 + v, sums[i][v], alpha, beta);
  }
}

// ---- Transposing pack (A rows -> [kc][MR] panels; W [N, K] rows -> [kc][NR] panels). ----

// In-register 16 x 16 transpose (unpack 32-bit, unpack 64-bit, then two 128-bit lane shuffles).
LATHE_AVX512 inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4)
    for (int j = 0; j < 2; ++j) {
      r[i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
      r[i + 2 * j + 1] =
          _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + j]), _mm512_castps_pd(t[i + j + 2])));
    }
  // r[4q + s] now holds, in each 128-bit lane L, elements (rows 4q..4q+3, column 4L + s).
  for (int i = 0; i < 4; ++i)
    for (int s = 0; s < 4; ++s) t[4 * i + s] = r[4 * i + s];
  for (int s = 0; s < 4; ++s) {
    const __m512 a = _mm512_shuffle_f32x4(t[s], t[4 + s], 0x88), b = _mm512_shuffle_f32x4(t[s], t[4 + s], 0xdd);
    const __m512 c = _mm512_shuffle_f32x4(t[8 + s], t[12 + s], 0x88), d = _mm512_shuffle_f32x4(t[8 + s], t[12 + s], 0xdd);
    r[s] = _mm512_shuffle_f32x4(a, c, 0x88);       // column s
    r[8 + s] = _mm512_shuffle_f32x4(a, c, 0xdd);   // column 8 + s
    r[4 + s] = _mm512_shuffle_f32x4(b, d, 0x88);   // column 4 + s
    r[12 + s] = _mm512_shuffle_f32x4(b, d, 0xdd);  // column 12 + s
  }
}

// One 16 x 16 block: rows [0, n_rows) x k [0, n_k) of src -> dst[p * stride + r] for r < 16 lanes of
// store_mask. Rows past n_rows load as zero (a zero mask loads nothing, so they may lie past the array).
template <class T, bool kFullK>
LATHE_AVX512 __attribute__((always_inline)) inline void transpose_block(const T* src, int64_t ld, int n_rows,
                                                                         int n_k, int stride, __mmask16 store_mask,
                                                                         float* dst) {
  const __mmask16 k_mask = kFullK ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n_k) - 1);
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = load_w(src + i * ld, i < n_rows ? k_mask : __mmask16(0));
  transpose16(r);
  if constexpr (kFullK) {
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) _mm512_mask_storeu_ps(dst + p * stride, store_mask, r[p]);
  } else {
    for (int p = 0; p < n_k; ++p) _mm512_mask_storeu_ps(dst + p * stride, store_mask, r[p]);
  }
}

template <class T>
LATHE_AVX512 void pack_transpose(const T* src, int64_t ld, int rows, int64_t kc, int stride, float* dst) {
  const int64_t kc_full = kc & ~int64_t{15};
  for (int r0 = 0; r0 < stride; r0 += 16) {
    const int lanes = stride - r0 < 16 ? stride - r0 : 16;  // destination lanes of this row group
    const __mmask16 store_mask = static_cast<__mmask16>((1u << lanes) - 1);
    const int n_rows = rows - r0 < 0 ? 0 : rows - r0 < lanes ? rows - r0 : lanes;
    const T* s = src + r0 * ld;
    for (int64_t p0 = 0; p0 < kc_full; p0 += 16) {  // the hot loop: whole 16-step blocks, fully unrolled
      // The rows are up to 16 streams a page apart, more than the hardware prefetcher follows: request
      // each row's data 4 blocks ahead (one line per row and block for f32, every other block for bf16).
      if (p0 + 64 < kc && (sizeof(T) == 4 || p0 % 32 == 0))
        for (int i = 0; i < n_rows; ++i) _mm_prefetch(reinterpret_cast<const char*>(s + i * ld + p0 + 64), _MM_HINT_T0);
      transpose_block<T, true>(s + p0, ld, n_rows, 16, stride, store_mask, dst + p0 * stride + r0);
    }
    if (kc_full < kc)
      transpose_block<T, false>(s + kc_full, ld, n_rows, static_cast<int>(kc - kc_full), stride, store_mask,
                                dst + kc_full * stride + r0);
  }
}

template <class TW, std::size_t... I>
constexpr auto make_gemv_nn_table(std::index_sequence<I...>) {
  return std::array<void (*)(int64_t, const float*, const TW*, int64_t, int64_t, int64_t, float*, int64_t, float,
                             float),
                    sizeof...(I)>{&gemv_nn_m<TW, static_cast<int>(I) + 1>...};
}

template <class TW>
LATHE_AVX512 void gemv_nn(int m, int64_t k, const float* x, const TW* w, int64_t ldw, int64_t j0, int64_t j1,
                          float* y, int64_t ldy, float alpha, float beta) {
  static constexpr auto kTable = make_gemv_nn_table<TW>(std::make_index_sequence<kGemvMaxM>());
  kTable[m - 1](k, x, w, ldw, j0, j1, y, ldy, alpha, beta);
}

}  // namespace

const GemmKernels& gemm_kernels_avx512() {
  static const GemmKernels k{.isa = GemmIsa::kAvx512, .mr = kMr, .nr = kNr, .f32 = &micro_f32,
                             .gemv_nt_f32 = &gemv_nt<float>, .gemv_nn_f32 = &gemv_nn<float>,
                             .gemv_nt_bf16 = &gemv_nt_bf16_avx512, .gemv_nn_bf16 = &gemv_nn<bf16>,
                             .pack_t_f32 = &pack_transpose<float>, .pack_t_bf16 = &pack_transpose<bf16>};
  return k;
}

const GemmKernels& gemm_kernels_avx512_bf16() {
  static const GemmKernels k = [] {
    GemmKernels t = gemm_kernels_avx512();
    t.isa = GemmIsa::kAvx512Bf16;
    t.mr_bf16 = kMr;
    t.nr_bf16 = kNr;
    t.dot_bf16 = &micro_bf16;
    return t;
  }();
  return k;
}

}  // namespace lathe::cpu
