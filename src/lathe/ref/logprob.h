// Scalar references of per-token log-probabilities (log_softmax gathered at the given ids) and of the
// fused head form with entropy, in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
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

// The sampler's processed distribution of one row of logits z [v] (post soft-cap), in double: x = z / temperature;
// rank tokens by x (then id); keep the top_k best (0: all), then the smallest best-ranked prefix of those whose
// mass reaches top_p of theirs (1: all); add `target` when it is not kept. logprob = x_t − lse_K(x),
// entropy = −Σ_K q log q. (ops/logprob.h LogprobProcessing.)
inline void processed_token_logprob(const double* z, int64_t v, int32_t target, double temperature, int64_t top_k,
                                    double top_p, double* logprob, double* entropy) {
  std::vector<double> x(z, z + v);
  for (double& a : x) a /= temperature;
  std::vector<int32_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  size_t n = top_k > 0 && top_k < v ? static_cast<size_t>(top_k) : order.size();
  if (top_p < 1) {
    double total = 0, above = 0;
    for (size_t i = 0; i < n; ++i) total += std::exp(x[order[i]] - x[order[0]]);
    size_t cut = 0;
    while (cut < n) {
      above += std::exp(x[order[cut++]] - x[order[0]]);
      if (above >= top_p * total) break;
    }
    n = cut;
  }
  std::vector<int32_t> kept(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n));
  if (std::find(kept.begin(), kept.end(), target) == kept.end()) kept.push_back(target);
  std::vector<double> xs;
  for (int32_t id : kept) xs.push_back(x[id]);
  const double lse = logsumexp(xs.data(), static_cast<int64_t>(xs.size()));
  *logprob = x[target] - lse;
  double h = 0;
  for (double a : xs) h -= std::exp(a - lse) * (a - lse);
  *entropy = h;
}

}  // namespace lathe::ref
