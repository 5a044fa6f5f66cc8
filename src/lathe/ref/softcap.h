// Scalar reference of logit soft-capping (Gemma 2), in double.
#pragma once

#include <cmath>
#include <cstdint>

namespace lathe::ref {

// y[i] = cap · tanh(x[i] / cap).
template <class T>
void softcap(const T* x, T* y, int64_t n, double cap) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(cap * std::tanh(x[i] / cap));
}

}  // namespace lathe::ref
