// Scalar reference of moe (ops/moe.h): one token at a time, double accumulation, experts applied as
// plain matrix-vector loops. The specification the grouped-GEMM kernel is tested against.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace lathe::ref {

// x [N, C], router [E, C], w_gate and w_up [E, F, C], w_down [E, C, F] -> out [N, C].
template <class T>
void moe(const T* x, const T* router, const T* w_gate, const T* w_up, const T* w_down, T* out, int64_t n_tokens,
         int64_t width, int64_t n_experts, int64_t ffn, int top_k, bool norm_topk_prob) {
  const int64_t C = width, E = n_experts, F = ffn;
  std::vector<double> p(E), h(F), acc(C);
  std::vector<bool> taken(E);
  for (int64_t n = 0; n < n_tokens; ++n) {
    const T* xn = x + n * C;
    double mx = -INFINITY, sum = 0;
    for (int64_t e = 0; e < E; ++e) {
      double dot = 0;
      for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(xn[c]) * router[e * C + c];
      p[e] = dot;
      mx = std::max(mx, dot);
    }
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(p[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::vector<int64_t> sel;  // top-k, ties to the lowest index
    std::fill(taken.begin(), taken.end(), false);
    double wsum = 0;
    for (int k = 0; k < top_k; ++k) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
      taken[best] = true;
      sel.push_back(best);
      wsum += p[best];
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t e : sel) {
      const double weight = norm_topk_prob ? p[e] / wsum : p[e];
      for (int64_t f = 0; f < F; ++f) {
        double g = 0, u = 0;
        for (int64_t c = 0; c < C; ++c) {
          g += static_cast<double>(w_gate[(e * F + f) * C + c]) * xn[c];
          u += static_cast<double>(w_up[(e * F + f) * C + c]) * xn[c];
        }
        h[f] = g / (1 + std::exp(-g)) * u;
      }
      for (int64_t c = 0; c < C; ++c) {
        double y = 0;
        for (int64_t f = 0; f < F; ++f) y += static_cast<double>(w_down[(e * C + c) * F + f]) * h[f];
        acc[c] += weight * y;
      }
    }
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = static_cast<T>(acc[c]);
  }
}

}  // namespace lathe::ref
