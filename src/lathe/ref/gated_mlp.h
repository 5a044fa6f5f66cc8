// Scalar reference of the gated activation at the heart of SwiGLU / GeGLU MLPs, in double.
#pragma once

#include <cstdint>

#include "lathe/ref/activation.h"

namespace lathe::ref {

// y[i] = act(gate[i]) · up[i], act one of ref::silu / gelu / gelu_tanh.
template <class T, class Act>
void gated_activation(const T* gate, const T* up, T* y, int64_t n, Act act) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(act(static_cast<double>(gate[i])) * up[i]);
}

}  // namespace lathe::ref
