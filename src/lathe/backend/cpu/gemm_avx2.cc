// AVX2 + FMA tier of the CPU gemm (CPUs without AVX-512): a 6 x 16 f32 micro-kernel (12 ymm
// accumulators) and the transposing packer; the skinny-M kernels are in gemv_avx2.cc. CMakeLists.txt
// compiles this file without AVX-512 (16 ymm registers, VEX encodings only), so LATHE_CPU=avx2 measures
// what an AVX2 CPU runs. Packing and threading are shared with the other tiers (gemm.cc).
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <array>
#include <cstdint>
#include <utility>

#include "lathe/backend/cpu/avx2_widen.h"
#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

// 6 x 16: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers; 2 loads + 6 broadcasts
// per 12 FMAs (6 cycles on two FMA ports, under the two loads a cycle).
constexpr int kMr = 6, kNv = 2, kNr = 8 * kNv;

// Lane mask of the n valid columns of 8-wide vector v (all ones from column 8 * v + 8 on).
LATHE_AVX2 inline __m256i column_mask(int n, int v) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8 * v), lane);
}

// Every loop over the tile is unrolled so the accumulators live in registers: with a run-time row index
// (the old column-edge loop) GCC kept acc[][] in memory and stored all 12 of them every k step, which
// bound the kernel by stores at 38% of the FMA peak.
template <int M>
LATHE_AVX2 void ukernel_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int n, float alpha,
                            float beta) {
  // The C rows are M separate lines no hardware prefetcher follows: request them now, they are stored
  // after the kc loop (16 floats may straddle two lines).
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 acc[M][kNv];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[kNv];
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) bv[v] = _mm256_load_ps(b + p * kNr + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + p * kMr + i);
#pragma GCC unroll 2
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (n == kNr) {
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
      for (int v = 0; v < kNv; ++v) {
        float* p = c + i * ldc + 8 * v;
        __m256 r = _mm256_mul_ps(acc[i][v], va);
        if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_loadu_ps(p), vb, r);
        _mm256_storeu_ps(p, r);
      }
    return;
  }
  // Column edge: masked loads and stores touch only the n valid columns.
  __m256i masks[kNv];
#pragma GCC unroll 2
  for (int v = 0; v < kNv; ++v) masks[v] = column_mask(n, v);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kNv; ++v) {
      float* p = c + i * ldc + 8 * v;
      __m256 r = _mm256_mul_ps(acc[i][v], va);
      if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_maskload_ps(p, masks[v]), vb, r);
      _mm256_maskstore_ps(p, masks[v], r);
    }
}

template <std::size_t... I>
constexpr auto make_f32_table(std::index_sequence<I...>) {
  using Fn = void (*)(int64_t, const float*, const float*, float*, int64_t, int, float, float);
  return std::array<Fn, sizeof...(I)>{&ukernel_f32<static_cast<int>(I) + 1>...};
}

LATHE_AVX2 void micro_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                          float alpha, float beta) {
  static constexpr auto kTable = make_f32_table(std::make_index_sequence<kMr>());
  kTable[m - 1](kc, a, b, c, ldc, n, alpha, beta);
}

// ---- Transposing pack (A rows -> [kc][MR] panels; W [N, K] rows -> [kc][NR] panels), 8 x 8 blocks. ----

using avx2::load_f32x8, avx2::widen;

// In-register 8 x 8 transpose: r[i][j] -> r[j][i] (unpack 32-bit, shuffle 64-bit, swap 128-bit halves).
LATHE_AVX2 inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// dst[p * stride + r] = src[r * ld + p] for r < rows, p < kc; 0 for rows <= r < stride. Row groups of 8
// destination lanes (MR = 6: one group of 6), K in 8-step blocks, the K tail (kc % 8) element by element.
// Rows past `rows` are never read (they may lie past the array).
template <class T>
LATHE_AVX2 void pack_transpose(const T* src, int64_t ld, int rows, int64_t kc, int stride, float* dst) {
  const int64_t kc8 = kc & ~int64_t{7};
  for (int r0 = 0; r0 < stride; r0 += 8) {
    const int lanes = stride - r0 < 8 ? stride - r0 : 8;
    const int n_rows = rows - r0 < 0 ? 0 : rows - r0 < lanes ? rows - r0 : lanes;
    const T* s = src + r0 * ld;
    float* d = dst + r0;
    for (int64_t p0 = 0; p0 < kc8; p0 += 8) {
      // The rows are up to 8 streams a page apart: request each row's line 4 lines ahead, once per line.
      if (p0 + 64 < kc && p0 % (64 / sizeof(T)) == 0)
        for (int i = 0; i < n_rows; ++i) _mm_prefetch(reinterpret_cast<const char*>(s + i * ld + p0 + 64), _MM_HINT_T0);
      __m256 r[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) r[i] = i < n_rows ? load_f32x8(s + i * ld + p0) : _mm256_setzero_ps();
      transpose8(r);
      if (lanes == 8) {
#pragma GCC unroll 8
        for (int p = 0; p < 8; ++p) _mm256_storeu_ps(d + (p0 + p) * stride, r[p]);
      } else if (stride == 6) {
        // A panels (MR = 6, one group): the 8 steps are 48 contiguous floats. Each 8-wide store spills past
        // its step into lanes the next store overwrites; the last step writes its 6 lanes exactly (4 + 2).
        // Element by element, this pack took 8% of a 1024^3 GEMM on Zen 2.
#pragma GCC unroll 8
        for (int p = 0; p < 7; ++p) _mm256_storeu_ps(d + (p0 + p) * stride, r[p]);
        float* last = d + (p0 + 7) * stride;
        _mm_storeu_ps(last, _mm256_castps256_ps128(r[7]));
        _mm_storel_pi(reinterpret_cast<__m64*>(last + 4), _mm256_extractf128_ps(r[7], 1));
      } else {  // a narrower group must not write into the next k step's lanes
        alignas(32) float row[8];
        for (int p = 0; p < 8; ++p) {
          _mm256_store_ps(row, r[p]);
          for (int j = 0; j < lanes; ++j) d[(p0 + p) * stride + j] = row[j];
        }
      }
    }
    for (int64_t p = kc8; p < kc; ++p)
      for (int j = 0; j < lanes; ++j) d[p * stride + j] = j < n_rows ? widen(s[j * ld + p]) : 0.f;
  }
}

}  // namespace

const GemmKernels& gemm_kernels_avx2() {
  static const GemmKernels k{.isa = GemmIsa::kAvx2, .mr = kMr, .nr = kNr, .f32 = &micro_f32,
                             .gemv_nt_f32 = &gemv_nt_f32_avx2,
                             .gemv_nt_bf16 = &gemv_nt_bf16_avx2,
                             .gemv_nt_f16 = &gemv_nt_f16_avx2,
                             .pack_t_f32 = &pack_transpose<float>, .pack_t_bf16 = &pack_transpose<bf16>,
                             .pack_t_f16 = &pack_transpose<f16>};
  return k;
}

}  // namespace lathe::cpu
