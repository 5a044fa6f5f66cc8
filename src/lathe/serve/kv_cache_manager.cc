// KvCacheManager: prefix lookup, slot allocation (all or nothing), commits of full blocks, freeing.
#include "lathe/serve/kv_cache_manager.h"

#include <algorithm>
#include <random>

#include "lathe/base/error.h"
#include "lathe/models/paged_kv_store.h"

namespace lathe {

namespace {

uint64_t seed_of(const KvCacheManagerConfig& c) {
  if (c.hash_seed) return *c.hash_seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

const KvCacheManagerConfig& checked(const KvCacheManagerConfig& c) {
  LATHE_CHECK_ARG(c.block_size >= 1, "[KvCacheManager] block_size must be >= 1, got ", c.block_size);
  LATHE_CHECK_ARG(c.n_blocks >= 2, "[KvCacheManager] n_blocks must be >= 2 (block 0 is the null block), got ",
                  c.n_blocks);
  return c;
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheManagerConfig& config)
    : config_(checked(config)), hasher_(seed_of(config)), pool_(config.n_blocks) {}

KvCacheManager::RequestBlocks& KvCacheManager::request(uint64_t id, const char* where) {
  const auto it = requests_.find(id);
  LATHE_CHECK_ARG(it != requests_.end(), "[KvCacheManager::", where, "] request ", id, " holds no blocks");
  return it->second;
}

std::span<const int32_t> KvCacheManager::block_table(uint64_t id) const {
  const auto it = requests_.find(id);
  LATHE_CHECK_ARG(it != requests_.end(), "[KvCacheManager::block_table] request ", id, " holds no blocks");
  return it->second.blocks;
}

double KvCacheManager::usage() const {
  return static_cast<double>(n_usable_blocks() - n_free_blocks()) / static_cast<double>(n_usable_blocks());
}

KvPrefixHit KvCacheManager::find_cached_prefix(std::span<const int32_t> tokens, const KvCacheKeys& keys) const {
  KvPrefixHit hit;
  if (!config_.enable_prefix_caching || tokens.empty()) return hit;
  hit.extra_keys_hash = hasher_.extra_keys_hash(keys);
  const int64_t P = config_.block_size;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / P;  // the last token is recomputed
  KvBlockHash parent = KvBlockHasher::kNoParent;
  for (int64_t i = 0; i < max_blocks; ++i) {
    parent = hasher_.block_hash(parent, tokens.subspan(i * P, P), hit.extra_keys_hash);
    const int32_t b = pool_.find_cached(parent);
    if (b < 0) break;
    hit.blocks.push_back(b);
    hit.hashes.push_back(parent);
  }
  hit.n_tokens = static_cast<int64_t>(hit.blocks.size()) * P;
  return hit;
}

int64_t KvCacheManager::n_blocks_to_allocate(const KvRequest& req, int64_t n_new_tokens, const KvPrefixHit* hit) const {
  LATHE_CHECK_ARG(n_new_tokens >= 0, "[KvCacheManager::allocate_slots] n_new_tokens must be >= 0, got ", n_new_tokens);
  const auto it = requests_.find(req.id);
  int64_t held = 0, computed = req.n_computed;
  if (it == requests_.end()) {
    LATHE_CHECK_ARG(hit != nullptr && req.n_computed == 0, "[KvCacheManager::allocate_slots] request ", req.id,
                    " holds no blocks: it needs n_computed 0 and its hit from find_cached_prefix");
    held = static_cast<int64_t>(hit->blocks.size());
    computed = hit->n_tokens;
  } else {
    LATHE_CHECK_ARG(hit == nullptr, "[KvCacheManager::allocate_slots] request ", req.id,
                    " already holds blocks: a prefix hit is only for its admission");
    held = static_cast<int64_t>(it->second.blocks.size());
    LATHE_CHECK_ARG(req.n_computed >= 0 && req.n_computed <= held * config_.block_size,
                    "[KvCacheManager::allocate_slots] request ", req.id, " has n_computed ", req.n_computed,
                    " but its ", held, " blocks hold ", held * config_.block_size, " tokens");
  }
  return std::max<int64_t>(0, kv_blocks_for(computed + n_new_tokens, config_.block_size) - held);
}

bool KvCacheManager::allocate_slots(const KvRequest& req, int64_t n_new_tokens, const KvPrefixHit* hit) {
  const int64_t n_new_blocks = n_blocks_to_allocate(req, n_new_tokens, hit);
  const bool admission = !requests_.count(req.id);
  int64_t n_available = pool_.n_free();
  if (admission)
    for (size_t i = 0; i < hit->blocks.size(); ++i) {
      // The hit must still name its prefix (no allocation since find_cached_prefix evicted it).
      const int32_t b = hit->blocks[i];
      LATHE_CHECK_ARG(hit->hashes.size() == hit->blocks.size() && b >= 1 && b < pool_.n_blocks() &&
                          pool_.block(b).hash == hit->hashes[i],
                      "[KvCacheManager::allocate_slots] request ", req.id, ": stale prefix hit (block ", b,
                      " no longer caches its prefix); call find_cached_prefix right before allocate_slots");
      if (pool_.block(b).ref_cnt == 0) --n_available;  // touching it takes it out of the free queue
    }
  if (n_new_blocks > n_available) return false;

  if (admission) {
    RequestBlocks& r = requests_[req.id];
    r.extra_keys_hash = hit->extra_keys_hash;
    pool_.touch(hit->blocks);
    r.blocks = hit->blocks;
    r.hashes = hit->hashes;
    stats_.prefix_cache_queries += static_cast<int64_t>(req.tokens.size());
    stats_.prefix_cache_hits += hit->n_tokens;
  }
  pool_.allocate(n_new_blocks, requests_[req.id].blocks);
  return true;
}

void KvCacheManager::commit_full_blocks(const KvRequest& req) {
  RequestBlocks& r = request(req.id, "commit_full_blocks");
  if (!config_.enable_prefix_caching) return;
  LATHE_CHECK_ARG(req.n_computed >= 0 && req.n_computed <= static_cast<int64_t>(req.tokens.size()) &&
                      req.n_computed <= static_cast<int64_t>(r.blocks.size()) * config_.block_size,
                  "[KvCacheManager::commit_full_blocks] request ", req.id, " has n_computed ", req.n_computed,
                  " with ", req.tokens.size(), " tokens and ", r.blocks.size(), " blocks");
  const int64_t P = config_.block_size, n_full = req.n_computed / P;
  for (int64_t i = static_cast<int64_t>(r.hashes.size()); i < n_full; ++i) {
    const KvBlockHash parent = i == 0 ? KvBlockHasher::kNoParent : r.hashes[i - 1];
    r.hashes.push_back(hasher_.block_hash(parent, req.tokens.subspan(i * P, P), r.extra_keys_hash));
    pool_.cache(r.blocks[i], r.hashes.back());  // false: another block holds this prefix already
  }
}

void KvCacheManager::free(uint64_t id) {
  RequestBlocks& r = request(id, "free");
  std::reverse(r.blocks.begin(), r.blocks.end());  // last block first (the header says why)
  pool_.free(r.blocks);
  requests_.erase(id);
}

}  // namespace lathe
