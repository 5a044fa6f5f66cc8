// Scalar reference of LayerNorm (torch.nn.LayerNorm: biased variance), accumulated in double.
#pragma once

#include <cmath>
#include <cstdint>

namespace lathe::ref {

// y[i, :] = (x[i, :] − μ_i) / sqrt(σ²_i + eps) · w + b, σ² the biased variance.  x, y [N, C]; w, b [C]
// (b may be null: no bias).
template <class T>
void layer_norm(const T* x, const T* w, const T* b, int64_t n, int64_t c, double eps, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const T* xr = x + i * c;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mean += xr[j];
    mean /= c;
    for (int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(var / c + eps);
    for (int64_t j = 0; j < c; ++j)
      y[i * c + j] = static_cast<T>((xr[j] - mean) * rstd * w[j] + (b ? static_cast<double>(b[j]) : 0.0));
  }
}

}  // namespace lathe::ref
