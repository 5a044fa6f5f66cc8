// Scalar reference of RMSNorm (HF LlamaRMSNorm / Gemma's (1 + w) variant), accumulated in double.
#pragma once

#include <cmath>
#include <cstdint>

namespace lathe::ref {

// y[i, :] = x[i, :] / sqrt(mean_j x[i, j]² + eps) · (weight_offset + w).  x, y [N, C], w [C].
template <class T>
void rms_norm(const T* x, const T* w, int64_t n, int64_t c, double eps, double weight_offset, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < c; ++j) ss += static_cast<double>(x[i * c + j]) * x[i * c + j];
    const double rstd = 1.0 / std::sqrt(ss / c + eps);
    for (int64_t j = 0; j < c; ++j) y[i * c + j] = static_cast<T>(x[i * c + j] * rstd * (weight_offset + w[j]));
  }
}

}  // namespace lathe::ref
