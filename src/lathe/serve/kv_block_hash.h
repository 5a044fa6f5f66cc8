// Prefix-cache keys of full KV blocks: block_hash = H(parent block's hash, the block's token ids, the
// request's extra keys), so a hash names the whole prefix up to its block, under one adapter and salt.
// H is 64-bit XXH3 (xxHash), seeded per hasher (per engine, never a process global): fast (about a
// nanosecond per token) and not cryptographic. A collision would serve another prefix's K/V; at 64
// bits that takes ~2^32 distinct cached blocks for even odds.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lathe/serve/kv_free_queue.h"

namespace lathe {

// What beyond its tokens decides whether a request may reuse a cached block.
struct KvCacheKeys {
  int64_t adapter_id = 0;  // LoRA adapter the K/V were computed with (0: the base model)
  std::string cache_salt;  // per request (tenant isolation); requests with different salts share nothing
};

class KvBlockHasher {
 public:
  explicit KvBlockHasher(uint64_t seed) : seed_(seed) {}

  // The extra keys folded into one value, once per request: pass it to every block_hash of the request.
  uint64_t extra_keys_hash(const KvCacheKeys& keys) const;
  // The hash of a full block of `tokens` [P] after the block hashed `parent` (kNoParent for a request's
  // first block).
  KvBlockHash block_hash(KvBlockHash parent, std::span<const int32_t> tokens, uint64_t extra_keys) const;

  static constexpr KvBlockHash kNoParent = 0;

 private:
  uint64_t seed_;
};

}  // namespace lathe
