// The serving engine's pool of KV blocks: which of the store's blocks each request holds, how many
// requests hold each (ref counts, shared prefixes), and the prefix cache's map from block hash to the
// block holding that prefix's K/V. Single-threaded (the engine loop's); owns ids, not memory.
//
// Block 0 is the null block: never handed out, never freed (a placeholder id for padding). Free blocks
// wait in a FreeKvBlockQueue, least recently freed at the head; a free block that still has a hash stays
// findable in the cache until allocate() reuses it, so eviction is LRU over free cached blocks.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "lathe/serve/kv_free_queue.h"

namespace lathe {

class KvBlockPool {
 public:
  // n_blocks ids [0, n_blocks), block 0 the null block; blocks 1.. start free, in id order.
  explicit KvBlockPool(int64_t n_blocks);
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  int64_t n_blocks() const { return static_cast<int64_t>(blocks_.size()); }  // the null block included
  int64_t n_free() const { return free_.size(); }  // blocks allocate() can hand out (cached ones included)
  const KvBlock& block(int32_t id) const { return blocks_.at(id); }
  const FreeKvBlockQueue& free_queue() const { return free_; }

  // Appends n blocks from the head of the free queue to `out`, each with ref count 1; a block that was
  // cached loses its hash (evicted). n must be <= n_free(): callers check first, so a refusal changes
  // nothing.
  void allocate(int64_t n, std::vector<int32_t>& out);
  // A prefix hit: one more holder for each block; a free one leaves the free queue.
  void touch(std::span<const int32_t> ids);
  // One holder fewer for each block, in the order given; a block reaching 0 goes to the tail of the free
  // queue (keeping its hash: still findable until reallocated).
  void free(std::span<const int32_t> ids);

  // The block caching `hash`, or -1.
  int32_t find_cached(KvBlockHash hash) const;
  // Commits a full, held block to the cache under `hash`. When another block already caches that hash
  // (two requests computed the same prefix at once), the block stays uncached and false is returned:
  // one block per hash, the duplicate is reused as a plain block once freed.
  bool cache(int32_t id, KvBlockHash hash);
  int64_t n_cached() const { return static_cast<int64_t>(cached_.size()); }

 private:
  KvBlock& held_block(int32_t id, const char* where);

  std::vector<KvBlock> blocks_;  // [n_blocks]; never resized (the free queue points into it)
  FreeKvBlockQueue free_;
  std::unordered_map<KvBlockHash, int32_t> cached_;  // hash -> block id
};

}  // namespace lathe
