// Scalar reference of scaled_dot_product_attention (ops/attention.h): plain loops, double accumulation,
// the masking rules written out one query/key pair at a time. The specification the kernels are tested on.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lathe::ref {

// q [B, T, H, D], k and v [B, S, Hkv, D], out [B, T, H, D]. window 0 = none; softcap 0 = off.
template <class T>
void scaled_dot_product_attention(const T* q, const T* k, const T* v, T* out, int64_t n_batch, int64_t n_q,
                                  int64_t n_kv, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, double scale,
                                  bool causal, int64_t window, double softcap, int64_t q_offset) {
  const int64_t group = n_heads / n_kv_heads;
  std::vector<double> s(n_kv);
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < n_q; ++i) {
        const T* qi = q + ((b * n_q + i) * n_heads + h) * head_dim;
        const int64_t qpos = q_offset + i;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n_kv; ++j) {
          const bool visible = !causal || (j <= qpos && (window == 0 || qpos - j < window));
          if (!visible) {
            s[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          const T* kj = k + ((b * n_kv + j) * n_kv_heads + hk) * head_dim;
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          dot *= scale;
          if (softcap > 0) dot = softcap * std::tanh(dot / softcap);
          s[j] = dot;
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (int64_t j = 0; j < n_kv; ++j) sum += (s[j] = std::exp(s[j] - mx));
        T* oi = out + ((b * n_q + i) * n_heads + h) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < n_kv; ++j) acc += s[j] * v[((b * n_kv + j) * n_kv_heads + hk) * head_dim + d];
          oi[d] = static_cast<T>(acc / sum);
        }
      }
    }
}

}  // namespace lathe::ref
