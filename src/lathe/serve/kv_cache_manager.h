// KvCacheManager: the KV blocks of each running request over a KvBlockPool, with automatic prefix
// caching. The scheduler asks it for room before each step (allocate_slots, which refuses whole so the
// scheduler can preempt), commits the blocks a step filled (commit_full_blocks), frees finished or
// preempted requests, and hands each request's block_table to ForwardBatch.
//
// A request's blocks form its block table: block i holds its positions [i·P, (i + 1)·P). Its first
// blocks may be shared with other requests (a cached prefix); the tables are append-only, so shared
// blocks are never written (a hit covers only full blocks before the last token, which is always
// recomputed: its logits are needed). Single-threaded: the engine loop owns the manager.
//
// With a PagedKvStore: the block ids are the store's (config n_blocks = store.n_blocks(), block_size =
// store.block_size()); the store's own allocate / free must not be used on that store meanwhile.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "lathe/models/kv_store.h"
#include "lathe/serve/kv_block_hash.h"
#include "lathe/serve/kv_block_pool.h"

namespace lathe {

struct KvCacheManagerConfig {
  int64_t n_blocks = 0;                  // the store's blocks, the null block 0 included (>= 2)
  int block_size = kDefaultKvBlockSize;  // P, the store's
  bool enable_prefix_caching = true;
  std::optional<uint64_t> hash_seed;  // unset: drawn from std::random_device (per manager, never global)
};

// What the manager reads of a request: a view of the scheduler's state, valid for the call.
struct KvRequest {
  uint64_t id = 0;                  // unique among the requests holding blocks
  std::span<const int32_t> tokens;  // every known token id: the prompt, then the outputs so far
  int64_t n_computed = 0;           // tokens whose K/V its blocks hold (the scheduler's num_computed_tokens)
};

// A request's cached prefix found at admission, and its ticket to the first allocate_slots.
struct KvPrefixHit {
  std::vector<int32_t> blocks;       // the cached blocks of its first blocks.size() full blocks, in order
  std::vector<KvBlockHash> hashes;   // their chained hashes
  int64_t n_tokens = 0;         // blocks.size() · P: tokens the request need not compute
  uint64_t extra_keys_hash = 0;  // the request's adapter id and cache salt (KvBlockHasher::extra_keys_hash)
};

// Counters in tokens (vLLM's prefix_cache_queries / prefix_cache_hits): every admission queries its
// known tokens and hits the cached prefix it starts from.
struct KvCacheStats {
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheManagerConfig& config);  // InvalidArgument on n_blocks < 2, P < 1

  // The longest chain of cached full blocks at the start of `tokens`, walked from block 0 to the first
  // miss, at most (tokens.size() - 1) / P blocks so the last token is always computed. For a request
  // holding no blocks (new, or preempted); takes and counts nothing: pass the result straight to
  // allocate_slots (another allocation in between may evict the blocks it names).
  KvPrefixHit find_cached_prefix(std::span<const int32_t> tokens, const KvCacheKeys& keys) const;

  // Room for req's tokens [0, n_computed + hit + n_new_tokens): appends new blocks to its table (and a
  // new request's first blocks are hit.blocks, shared). A request holding no blocks must come with its
  // `hit` from find_cached_prefix and n_computed 0; it then has hit->n_tokens computed tokens. Returns
  // false and changes nothing when too few blocks are free: the scheduler may preempt and retry.
  bool allocate_slots(const KvRequest& req, int64_t n_new_tokens, const KvPrefixHit* hit = nullptr);
  // New blocks allocate_slots would take (to reserve room at admission; 0 if none).
  int64_t n_blocks_to_allocate(const KvRequest& req, int64_t n_new_tokens, const KvPrefixHit* hit = nullptr) const;

  // After a step computed K/V up to req.n_computed: every newly full block of req enters the prefix
  // cache under its chained hash (req.tokens must cover n_computed). A no-op with caching off.
  void commit_full_blocks(const KvRequest& req);

  // Returns the request's blocks, last block first (a request's last blocks are the least likely to be
  // shared, so LRU eviction takes them first); cached ones stay findable until reallocated. Finished and
  // preempted requests alike.
  void free(uint64_t id);

  bool has_request(uint64_t id) const { return requests_.count(id) > 0; }
  // Block i holds the request's positions [i·P, (i + 1)·P): SequenceChunk::block_table takes it. Valid
  // until the request's next allocate_slots or free.
  std::span<const int32_t> block_table(uint64_t id) const;

  int block_size() const { return config_.block_size; }
  int64_t n_usable_blocks() const { return pool_.n_blocks() - 1; }  // all but the null block
  int64_t n_free_blocks() const { return pool_.n_free(); }         // free cached blocks included
  double usage() const;  // blocks held / usable blocks, in [0, 1] (vLLM's kv_cache_usage_perc)
  const KvCacheStats& stats() const { return stats_; }
  const KvBlockPool& pool() const { return pool_; }

 private:
  struct RequestBlocks {
    std::vector<int32_t> blocks;       // its block table
    std::vector<KvBlockHash> hashes;   // the hash chain of its full blocks committed so far
    uint64_t extra_keys_hash = 0;
  };
  RequestBlocks& request(uint64_t id, const char* where);

  KvCacheManagerConfig config_;
  KvBlockHasher hasher_;
  KvBlockPool pool_;
  std::unordered_map<uint64_t, RequestBlocks> requests_;
  KvCacheStats stats_;
};

}  // namespace lathe
