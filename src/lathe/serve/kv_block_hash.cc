// KvBlockHasher over XXH3-64's streaming API: parent and extra keys, then the token ids, in one digest.
#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's definition, so the state lives on the stack
#include "lathe/serve/kv_block_hash.h"

#include <xxhash.h>

namespace lathe {

uint64_t KvBlockHasher::extra_keys_hash(const KvCacheKeys& keys) const {
  XXH3_state_t st;
  XXH3_64bits_reset_withSeed(&st, seed_);
  XXH3_64bits_update(&st, &keys.adapter_id, sizeof keys.adapter_id);
  // The salt's length first, so (adapter, salt) pairs cannot run into each other's bytes.
  const uint64_t n = keys.cache_salt.size();
  XXH3_64bits_update(&st, &n, sizeof n);
  XXH3_64bits_update(&st, keys.cache_salt.data(), keys.cache_salt.size());
  return XXH3_64bits_digest(&st);
}

KvBlockHash KvBlockHasher::block_hash(KvBlockHash parent, std::span<const int32_t> tokens,
                                      uint64_t extra_keys) const {
  XXH3_state_t st;
  XXH3_64bits_reset_withSeed(&st, seed_);
  const uint64_t head[2] = {parent, extra_keys};
  XXH3_64bits_update(&st, head, sizeof head);
  XXH3_64bits_update(&st, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&st);
}

}  // namespace lathe
