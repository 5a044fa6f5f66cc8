// Contiguous per-layer key/value cache for single-sequence generation (the paged, batched cache of the
// serving engine is a later layer). Capacity is fixed at creation; nothing is allocated per token.
#pragma once

#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe {

class KvCache {
 public:
  KvCache(int64_t n_layers, int64_t max_tokens, int64_t n_kv_heads, int64_t head_dim);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  Tensor& keys(int layer) { return k_[layer]; }    // [1, capacity, Hkv, D]
  Tensor& values(int layer) { return v_[layer]; }  // [1, capacity, Hkv, D]
  void advance(int64_t n) { length_ += n; }
  void reset() { length_ = 0; }

 private:
  std::vector<Tensor> k_, v_;
  int64_t capacity_ = 0, length_ = 0;
};

}  // namespace lathe
