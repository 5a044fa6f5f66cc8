// The KV store a forward writes its keys and values into and attends over: it owns the cache memory,
// each sequence's slots in it, and the attention read of a layer. PagedKvStore (paged_kv_store.h) is the
// CPU block pool; a GPU store implements the same interface.
#pragma once

#include <cstdint>
#include <span>

#include "lathe/base/error.h"
#include "lathe/models/forward_batch.h"
#include "lathe/ops/attention.h"

namespace lathe {

inline constexpr int kDefaultKvBlockSize = 16;  // P: KV positions per block

// Thrown by KvStore::allocate when too few blocks are free (a scheduler can wait or preempt on it).
class KvStoreFull : public Error {
 public:
  using Error::Error;
};

// The attention shape a store holds keys and values for; a forward checks it against its model once.
struct KvLayout {
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;  // L, H, Hkv, D
  bool operator==(const KvLayout&) const = default;
};

// A sequence's claim on the store, from KvStore::allocate.
struct KvSequence {
  int32_t id = -1;
};

class KvStore {
 public:
  KvStore() = default;
  KvStore(const KvStore&) = delete;  // a copy would hand out the same blocks twice
  KvStore& operator=(const KvStore&) = delete;
  virtual ~KvStore() = default;

  virtual KvLayout layout() const = 0;

  // Room for positions [0, max_tokens) of a new sequence, reserved at once. Throws KvStoreFull when the
  // store has too few free blocks, InvalidArgument when max_tokens < 1.
  virtual KvSequence allocate(int64_t max_tokens) = 0;
  // Returns the sequence's blocks to the store; the handle is invalid afterwards.
  virtual void free(KvSequence seq) = 0;
  // Block b holds the sequence's positions [b·P, (b + 1)·P): ForwardBatch::block_tables takes this.
  virtual std::span<const int32_t> block_table(KvSequence seq) const = 0;
  virtual int block_size() const = 0;         // P
  virtual int64_t capacity_tokens() const = 0;  // all blocks · P
  // Block ids are [0, n_blocks()). attention() reads whichever blocks ForwardBatch::block_tables name,
  // so a block manager outside the store (serve/kv_cache_manager.h: ref counts, shared prefix blocks)
  // may own which ids each sequence uses instead of allocate / free; one store is driven one way or the
  // other, never both at once.
  int64_t n_blocks() const { return capacity_tokens() / block_size(); }
  virtual int64_t free_tokens() const = 0;      // free blocks · P

  // One layer's attention for a whole batch. First writes every row's k and v into its slot (its
  // position, through its sequence's block table), then attends: sequence s's rows
  // [seq_starts[s], seq_starts[s + 1]) see the keys j < context_lens[s] with j <= their position,
  // inside opt.window, softcapped by opt.softcap, scaled by opt.scale (0: 1/sqrt(D)). Keys at positions
  // a call does not write must have been written by earlier calls. No allocation in steady state (per-worker
  // scratch is sized at creation); one call at a time. opt.causal must be true, q_offset 0, key_start unset.
  // q, k, v and out hold N rows of layout()'s H, Hkv and D (the decoder checks the layout once per forward).
  virtual void attention(int layer, const ForwardBatch& batch, const float* q /* [N, H, D] rotated */,
                         const float* k, const float* v /* [N, Hkv, D] rotated */, float* out /* [N, H, D] */,
                         const AttentionOptions& opt) = 0;
};

}  // namespace lathe
