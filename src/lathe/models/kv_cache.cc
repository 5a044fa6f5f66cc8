#include "lathe/models/kv_cache.h"

namespace lathe {

KvCache::KvCache(int64_t n_layers, int64_t max_tokens, int64_t n_kv_heads, int64_t head_dim) : capacity_(max_tokens) {
  for (int64_t l = 0; l < n_layers; ++l) {
    k_.push_back(Tensor::zeros({1, max_tokens, n_kv_heads, head_dim}));
    v_.push_back(Tensor::zeros({1, max_tokens, n_kv_heads, head_dim}));
  }
}

}  // namespace lathe
