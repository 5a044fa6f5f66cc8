// Scalar reference of rope (ops/rope.h): the rotation evaluated in double from the f32 angle that
// transformers computes (position · inv_freq rounded to f32), so tests measure only kernel rounding.
#pragma once

#include <cmath>
#include <cstdint>

namespace lathe::ref {

// x, y [B, T, H, D]; positions [T] (per_batch false) or [B, T]; inv_freq [half], 2·half <= D.
template <class T>
void rope(const T* x, T* y, int64_t n_batch, int64_t n_tokens, int64_t n_heads, int64_t head_dim,
          const int32_t* positions, bool per_batch, const float* inv_freq, int64_t half) {
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float pos = static_cast<float>(positions[per_batch ? b * n_tokens + t : t]);
      for (int64_t h = 0; h < n_heads; ++h) {
        const T* xr = x + ((b * n_tokens + t) * n_heads + h) * head_dim;
        T* yr = y + ((b * n_tokens + t) * n_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const double angle = static_cast<float>(pos * inv_freq[i]);
          const double c = std::cos(angle), s = std::sin(angle);
          const double x1 = xr[i], x2 = xr[i + half];
          yr[i] = static_cast<T>(x1 * c - x2 * s);
          yr[i + half] = static_cast<T>(x2 * c + x1 * s);
        }
        for (int64_t i = 2 * half; i < head_dim; ++i) yr[i] = xr[i];
      }
    }
}

}  // namespace lathe::ref
