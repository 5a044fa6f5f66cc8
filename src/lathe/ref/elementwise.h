// Scalar references of the element-wise ops (the specification the kernels are tested against).
#pragma once

#include <cstdint>

namespace lathe::ref {

// y[i] = a[i] + b[i]
template <class T>
void add(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

// y[i] = a[i] · b[i]
template <class T>
void mul(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

// y[i] = x[i] · s
template <class T>
void scale(const T* x, T s, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

}  // namespace lathe::ref
