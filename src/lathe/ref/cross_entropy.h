// Scalar references of log-sum-exp, mean token cross-entropy (torch.nn.functional.cross_entropy with
// ignore_index, reduction "mean"), in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace lathe::ref {

// log Σ_j exp(x[j]) over one row of v values.
template <class T>
double logsumexp(const T* x, int64_t v) {
  double m = -std::numeric_limits<double>::infinity(), s = 0;
  for (int64_t j = 0; j < v; ++j) m = std::max<double>(m, x[j]);
  for (int64_t j = 0; j < v; ++j) s += std::exp(x[j] - m);
  return m + std::log(s);
}

// mean over rows with labels[i] != ignore_index of lse(z_i) − z_i[labels[i]], z = logits [n, v], or
// with final_softcap > 0, z = cap·tanh(logits / cap) (Gemma 2). NaN when every row is ignored (as torch).
template <class T>
double cross_entropy(const T* logits, const int32_t* labels, int64_t n, int64_t v, int ignore_index,
                     double final_softcap = 0) {
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] == ignore_index) continue;
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    auto z = [&](int64_t j) {
      const double a = logits[i * v + j];
      return final_softcap > 0 ? final_softcap * std::tanh(a / final_softcap) : a;
    };
    for (int64_t j = 0; j < v; ++j) m = std::max(m, z(j));
    for (int64_t j = 0; j < v; ++j) s += std::exp(z(j) - m);
    total += m + std::log(s) - z(labels[i]);
    ++count;
  }
  return total / static_cast<double>(count);
}

}  // namespace lathe::ref
