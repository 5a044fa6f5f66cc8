// Scalar references of per-token log-probabilities (log_softmax gathered at the given ids) and of the
// fused head form with entropy, in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "lathe/ref/cross_entropy.h"

namespace lathe::ref {

// out[i] = logits[i, ids[i]] − lse(logits[i, :]).  logits [n, v], ids [n] in range, out [n].
template <class T>
void token_logprobs(const T* logits, const int32_t* ids, int64_t n, int64_t v, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i * v + ids[i]] - logsumexp(logits + i * v, v);
}

// z = hidden [n, c] · weightᵀ [c, v] (or cap·tanh of it when final_softcap > 0), p = softmax(z) per row:
// logprobs[i] = log p[i, targets[i]] and entropy[i] = −Σ_j p_ij·log p_ij (entropy may be null); rows
// whose target is ignore_index give 0 and 0.
template <class T>
void linear_token_logprobs(const T* hidden, const T* weight, const int32_t* targets, int64_t n, int64_t c, int64_t v,
                           double final_softcap, int ignore_index, double* logprobs, double* entropy) {
  std::vector<double> z(v);
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] == ignore_index) {
      logprobs[i] = 0;
      if (entropy) entropy[i] = 0;
      continue;
    }
    for (int64_t j = 0; j < v; ++j) {
      double a = 0;
      for (int64_t k = 0; k < c; ++k) a += static_cast<double>(hidden[i * c + k]) * weight[j * c + k];
      z[j] = final_softcap > 0 ? final_softcap * std::tanh(a / final_softcap) : a;
    }
    const double lse = logsumexp(z.data(), v);
    logprobs[i] = z[targets[i]] - lse;
    if (!entropy) continue;
    double h = 0;
    for (int64_t j = 0; j < v; ++j) h -= std::exp(z[j] - lse) * (z[j] - lse);
    entropy[i] = h;
  }
}

}  // namespace lathe::ref
