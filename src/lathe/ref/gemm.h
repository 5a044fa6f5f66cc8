// Scalar reference of gemm (the specification the fast kernels are tested against). Accumulates in
// double so tests measure only the kernel's rounding.
#pragma once

#include <cstdint>

namespace lathe::ref {

template <class TA, class TB, class ToFloat>
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda,
          const TB* b, int64_t ldb, float beta, float* c, int64_t ldc, ToFloat to_float) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = to_float(trans_a ? a[p * lda + i] : a[i * lda + p]);
        const double bv = to_float(trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        acc += av * bv;
      }
      float& out = c[i * ldc + j];
      out = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : static_cast<double>(beta) * out));
    }
}

}  // namespace lathe::ref
