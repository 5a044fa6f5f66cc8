// Scalar reference of the embedding lookup and its weight gradient.
#pragma once

#include <cstdint>

namespace lathe::ref {

// out[i, :] = to_float(weight[ids[i], :]).  weight [V, C], ids [N] (in range), out [N, C].
template <class TW, class ToFloat>
void embedding(const TW* weight, const int32_t* ids, int64_t n, int64_t c, float* out, ToFloat to_float) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) out[i * c + j] = to_float(weight[ids[i] * c + j]);
}

// Accumulates: dweight[ids[i], :] += g[i, :] (in double, then rounded).  dweight [V, C], g [N, C].
inline void embedding_backward(const float* g, const int32_t* ids, int64_t n, int64_t v, int64_t c, float* dweight) {
  for (int64_t row = 0; row < v; ++row)
    for (int64_t j = 0; j < c; ++j) {
      double acc = dweight[row * c + j];
      for (int64_t i = 0; i < n; ++i)
        if (ids[i] == row) acc += g[i * c + j];
      dweight[row * c + j] = static_cast<float>(acc);
    }
}

}  // namespace lathe::ref
