// The CPU KV store: a pool of fixed-size blocks allocated once, per layer K and V [n_blocks, Hkv, P, D]
// f32, bf16 or int8 (a KV head's keys of one block contiguous), handed out to sequences whole at allocate.
// Attention reads the blocks in place (ops/paged_attention.h); a bf16 pool holds twice the tokens in the
// same memory, its keys and values rounded to nearest even when written; an int8 pool ~4x (D + 4 bytes a
// slot: the codes and an f32 scale [n_blocks, Hkv, P] per layer for K and for V, indexed by block id
// like the codes, so whatever shares or frees a block shares or frees its scales).
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/models/config.h"
#include "lathe/models/kv_store.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

struct PagedKvStoreConfig {
  int n_layers = 0;    // L
  int n_heads = 0;     // H: query heads of the layers attending over the store
  int n_kv_heads = 0;  // Hkv
  int head_dim = 0;    // D
  int64_t n_blocks = 0;
  int block_size = kDefaultKvBlockSize;  // P
  int n_threads = 0;  // workers attention may use (scratch is sized for them); 0: the current context's pool
  DType kv_dtype = DType::kF32;  // of K and V: kF32, kBF16 or kI8 (codes plus per-slot f32 scales)
};

// Bytes one (token, KV head) slot of K (or of V) takes in a store of kv_dtype: D elements, plus the f32
// scale of an int8 slot. f32 rather than f16 scales: 4 bytes beside D >= 64 codes cost <= 6% of a slot,
// and absmax / 127 of small keys would leave f16's normal range (6e-5) and lose precision there.
int64_t kv_slot_bytes(int64_t head_dim, DType kv_dtype);

// The store for a model's attention: its L, H, Hkv and D, with n_blocks blocks of block_size positions
// holding kv_dtype.
PagedKvStoreConfig paged_kv_store_config(const ModelConfig& c, int64_t n_blocks, int block_size = kDefaultKvBlockSize,
                                         DType kv_dtype = DType::kF32);

// Blocks needed for n_tokens positions at block size P.
inline int64_t kv_blocks_for(int64_t n_tokens, int block_size) { return (n_tokens + block_size - 1) / block_size; }

class PagedKvStore final : public KvStore {
 public:
  explicit PagedKvStore(const PagedKvStoreConfig& config);

  KvLayout layout() const override {
    return {config_.n_layers, config_.n_heads, config_.n_kv_heads, config_.head_dim};
  }
  KvSequence allocate(int64_t max_tokens) override;
  void free(KvSequence seq) override;
  std::span<const int32_t> block_table(KvSequence seq) const override;
  int block_size() const override { return config_.block_size; }
  int64_t capacity_tokens() const override { return config_.n_blocks * config_.block_size; }
  int64_t free_tokens() const override { return static_cast<int64_t>(free_blocks_.size()) * config_.block_size; }

  void attention(int layer, const ForwardBatch& batch, const float* q, const float* k, const float* v, float* out,
                 const AttentionOptions& opt) override;

  const PagedKvStoreConfig& config() const { return config_; }
  const Tensor& keys(int layer) const { return k_[layer]; }    // [n_blocks, Hkv, P, D] of kv_dtype
  const Tensor& values(int layer) const { return v_[layer]; }  // [n_blocks, Hkv, P, D] of kv_dtype
  const Tensor& key_scales(int layer) const { return k_scales_[layer]; }    // [n_blocks, Hkv, P] f32, int8 only
  const Tensor& value_scales(int layer) const { return v_scales_[layer]; }  // [n_blocks, Hkv, P] f32, int8 only

 private:
  void check_sequence(KvSequence seq) const;

  PagedKvStoreConfig config_;
  std::vector<Tensor> k_, v_;               // [L] of [n_blocks, Hkv, P, D], kv_dtype
  std::vector<Tensor> k_scales_, v_scales_;  // [L] of [n_blocks, Hkv, P] f32 when kv_dtype is kI8, else empty
  std::vector<int32_t> free_blocks_;        // a stack of free block ids
  std::vector<std::vector<int32_t>> tables_;  // per sequence id: its blocks (empty: id unused)
  std::vector<int32_t> free_ids_;           // sequence ids to reuse
  int n_workers_ = 1;
  std::vector<float> scratch_;        // n_workers_ · paged_attention_scratch_floats
  std::vector<int64_t> task_starts_;  // [S + 1], sized for n_blocks sequences (grows only if sequences share blocks)
};

}  // namespace lathe
