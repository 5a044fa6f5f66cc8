// AVX-512 micro-kernels of the CPU gemm: the f32 register-blocked tile (FMA), the bf16-pair tile
// (vdpbf16ps, AVX-512 BF16) and the transposing packer. The skinny-M (decode GEMV) kernels live in
// gemv_avx512.cc (bf16 x bf16 on AVX-512 BF16: gemv_avx512_bf16.cc); packing and threading in gemm.cc.
// Every function carries its target attribute, so this file is correct without -march=native; the
// dispatcher calls it only when the CPU reports the ISA.
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <array>
#include <cstdint>
#include <utility>

#include "lathe/backend/cpu/avx512_widen.h"
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
  for (int i = 0; i < 16; ++i) r[i] = avx512::load_f32x16(src + i * ld, i < n_rows ? k_mask : __mmask16(0));
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

}  // namespace

const GemmKernels& gemm_kernels_avx512() {
  static const GemmKernels k{.isa = GemmIsa::kAvx512, .mr = kMr, .nr = kNr, .f32 = &micro_f32,
                             .gemv_nt_f32 = &gemv_nt_f32_avx512,
                             .gemv_nt_bf16 = &gemv_nt_bf16_avx512,
                             .gemv_nt_f16 = &gemv_nt_f16_avx512,
                             .gemv_passes = true,
                             .pack_t_f32 = &pack_transpose<float>, .pack_t_bf16 = &pack_transpose<bf16>,
                             .pack_t_f16 = &pack_transpose<f16>};
  return k;
}

const GemmKernels& gemm_kernels_avx512_bf16() {
  static const GemmKernels k = [] {
    GemmKernels t = gemm_kernels_avx512();
    t.isa = GemmIsa::kAvx512Bf16;
    t.mr_bf16 = kMr;
    t.nr_bf16 = kNr;
    t.dot_bf16 = &micro_bf16;
    t.gemv_nt_dot_bf16 = &gemv_nt_dot_bf16_avx512bf16;
    return t;
  }();
  return k;
}

}  // namespace lathe::cpu
