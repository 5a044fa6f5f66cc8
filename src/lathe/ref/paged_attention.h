// Scalar reference of paged_attention (ops/paged_attention.h): plain loops, double accumulation, each
// key looked up through its sequence's block table one at a time. The specification the kernel is tested on.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace lathe::ref {

// q and out [N, H, D]; k_pool and v_pool [n_blocks, Hkv, P, D]; positions [N]; seq_starts [S + 1];
// block_tables[s][b] the pool block of sequence s's positions [b·P, (b + 1)·P); context_lens [S].
// Row i of sequence s sees key j iff j < context_lens[s], j <= positions[i] and (window == 0 or
// positions[i] − j < window). window 0 = none; softcap 0 = off.
template <class T, class Table>
void paged_attention(const T* q, const T* k_pool, const T* v_pool, T* out, const int32_t* positions,
                     const int64_t* seq_starts, const Table* block_tables, const int64_t* context_lens, int64_t n_seqs,
                     int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t block_size, double scale,
                     int64_t window, double softcap) {
  const int64_t group = n_heads / n_kv_heads;
  for (int64_t s = 0; s < n_seqs; ++s) {
    const int64_t S = context_lens[s];
    // Element offset of key position j, kv head hk, in the pool.
    auto at = [&](int64_t j, int64_t hk) {
      const int64_t block = block_tables[s][j / block_size];
      return ((block * n_kv_heads + hk) * block_size + j % block_size) * head_dim;
    };
    std::vector<double> sc(S);
    for (int64_t i = seq_starts[s]; i < seq_starts[s + 1]; ++i) {
      const int64_t pos = positions[i];
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t hk = h / group;
        const T* qi = q + (i * n_heads + h) * head_dim;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < S; ++j) {
          if (j > pos || (window > 0 && pos - j >= window)) {
            sc[j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          const T* kj = k_pool + at(j, hk);
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          dot *= scale;
          if (softcap > 0) dot = softcap * std::tanh(dot / softcap);
          sc[j] = dot;
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
        T* oi = out + (i * n_heads + h) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j)
            if (sc[j] != 0) acc += sc[j] * v_pool[at(j, hk) + d];
          oi[d] = static_cast<T>(acc / sum);
        }
      }
    }
  }
}

// The int8 KV cache's quantiser (ops/paged_attention.h): codes [D] of x [D] and the returned scale
// s = absmax / 127, c = round(x / s) with halves away from zero (std::round); all zeros for x = 0.
inline float quantize_kv_int8(const float* x, int64_t head_dim, int8_t* codes) {
  float amax = 0.f;
  for (int64_t d = 0; d < head_dim; ++d) amax = std::max(amax, std::fabs(x[d]));
  const float s = amax / 127.f, inv = s != 0.f ? 1.f / s : 0.f;
  for (int64_t d = 0; d < head_dim; ++d)
    codes[d] = static_cast<int8_t>(std::clamp(std::round(x[d] * inv), -127.f, 127.f));
  return s;
}

}  // namespace lathe::ref
