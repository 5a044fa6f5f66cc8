// AVX2 + FMA tier of the CPU gemm (CPUs without AVX-512): a 6 x 16 f32 micro-kernel (12 ymm
// accumulators); the skinny-M kernels are in gemv_avx2.cc. Packing and threading are shared with the
// other tiers (gemm.cc).
// GCC 12 flags the intrinsics' internal _mm512_undefined_*() as maybe-uninitialized once inlined
// (GCC PR 105593, fixed in 13); the warning is spurious.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

// 6 x 16: 12 accumulators + 2 B vectors + 1 broadcast of the 16 ymm registers; 2 loads + 6 broadcasts
// per 12 FMAs.
constexpr int kMr = 6, kNv = 2, kNr = 8 * kNv;

template <int M>
LATHE_AVX2 void ukernel_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int n, float alpha,
                            float beta) {
  __m256 acc[M][kNv];
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[kNv];
    for (int v = 0; v < kNv; ++v) bv[v] = _mm256_load_ps(b + p * kNr + 8 * v);
    for (int i = 0; i < M; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + p * kMr + i);
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm256_fmadd_ps(ai, bv[v], acc[i][v]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  for (int i = 0; i < M; ++i) {
    if (n == kNr) {
      for (int v = 0; v < kNv; ++v) {
        float* p = c + i * ldc + 8 * v;
        __m256 r = _mm256_mul_ps(acc[i][v], va);
        if (beta != 0.f) r = _mm256_fmadd_ps(_mm256_loadu_ps(p), vb, r);
        _mm256_storeu_ps(p, r);
      }
    } else {  // column edge: go through memory so only the n valid columns are touched
      alignas(32) float row[kNr];
      for (int v = 0; v < kNv; ++v) _mm256_store_ps(row + 8 * v, acc[i][v]);
      for (int j = 0; j < n; ++j) {
        float& out = c[i * ldc + j];
        out = beta == 0.f ? alpha * row[j] : alpha * row[j] + beta * out;
      }
    }
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

}  // namespace

const GemmKernels& gemm_kernels_avx2() {
  static const GemmKernels k{.isa = GemmIsa::kAvx2, .mr = kMr, .nr = kNr, .f32 = &micro_f32,
                             .gemv_nt_f32 = &gemv_nt_f32_avx2, .gemv_nn_f32 = &gemv_nn_f32_avx2,
                             .gemv_nt_bf16 = &gemv_nt_bf16_avx2, .gemv_nn_bf16 = &gemv_nn_bf16_avx2};
  return k;
}

}  // namespace lathe::cpu
