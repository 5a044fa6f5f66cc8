// Portable C++ tier of the CPU gemm: the fallback for CPUs without AVX2 and the baseline the tests run
// on every machine. Same packed layouts as the SIMD tiers (gemm_internal.h); the compiler may vectorise it.
#include <cstdint>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

constexpr int kMr = 4, kNr = 16;

void micro_f32(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
               float beta) {
  float acc[kMr][kNr] = {};
  for (int64_t p = 0; p < kc; ++p)
    for (int i = 0; i < kMr; ++i)
      for (int j = 0; j < kNr; ++j) acc[i][j] += a[p * kMr + i] * b[p * kNr + j];
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float& out = c[i * ldc + j];
      out = beta == 0.f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * out;
    }
}

inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_f32(v); }
inline float to_f32(f16 v) { return f16_to_f32(v); }

template <class TW>
void gemv_nt(int m, int64_t k, const float* x, const TW* w, int64_t ldw, int64_t j0, int64_t j1, float* y,
             int64_t ldy, float alpha, float beta) {
  for (int i = 0; i < m; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      float acc = 0.f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * to_f32(w[j * ldw + p]);
      float& out = y[i * ldy + j];
      out = beta == 0.f ? alpha * acc : alpha * acc + beta * out;
    }
}

}  // namespace

const GemmKernels& gemm_kernels_scalar() {
  static const GemmKernels k{.isa = GemmIsa::kScalar, .mr = kMr, .nr = kNr, .f32 = &micro_f32,
                             .gemv_nt_f32 = &gemv_nt<float>, .gemv_nt_bf16 = &gemv_nt<bf16>,
                             .gemv_nt_f16 = &gemv_nt<f16>};
  return k;
}

}  // namespace lathe::cpu
