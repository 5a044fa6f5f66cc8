// KvBlockPool: allocation from the free queue's head with eviction of cached hashes, ref counting,
// and the hash -> block map.
#include "lathe/serve/kv_block_pool.h"

#include "lathe/base/error.h"

namespace lathe {

namespace {

std::vector<KvBlock> numbered_blocks(int64_t n) {
  LATHE_CHECK_ARG(n >= 2 && n <= INT32_MAX, "[KvBlockPool] n_blocks must be in [2, 2^31) (block 0 is the null block), got ", n);
  std::vector<KvBlock> b(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) b[i].id = static_cast<int32_t>(i);
  return b;
}

}  // namespace

KvBlockPool::KvBlockPool(int64_t n_blocks)
    : blocks_(numbered_blocks(n_blocks)), free_(std::span<KvBlock>(blocks_).subspan(1)) {
  cached_.reserve(static_cast<size_t>(n_blocks));  // no rehash while the cache fills
}

KvBlock& KvBlockPool::held_block(int32_t id, const char* where) {
  LATHE_CHECK_ARG(id >= 1 && id < n_blocks(), "[KvBlockPool::", where, "] block ", id, " is not in [1, ", n_blocks(),
                  ") (block 0 is the null block)");
  return blocks_[id];
}

void KvBlockPool::allocate(int64_t n, std::vector<int32_t>& out) {
  LATHE_CHECK_ARG(n >= 0 && n <= n_free(), "[KvBlockPool::allocate] ", n, " blocks asked, ", n_free(), " free");
  for (int64_t i = 0; i < n; ++i) {
    KvBlock& b = free_.pop_front();
    if (b.hash) {  // the least recently used cached block: its prefix is forgotten
      cached_.erase(*b.hash);
      b.hash.reset();
    }
    b.ref_cnt = 1;
    out.push_back(b.id);
  }
}

void KvBlockPool::touch(std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    KvBlock& b = held_block(id, "touch");
    if (b.ref_cnt == 0) free_.remove(b);
    ++b.ref_cnt;
  }
}

void KvBlockPool::free(std::span<const int32_t> ids) {
  for (const int32_t id : ids) {
    KvBlock& b = held_block(id, "free");
    LATHE_ASSERT(b.ref_cnt > 0, "block ", id, " freed more often than held");
    if (--b.ref_cnt == 0) free_.push_back(b);
  }
}

int32_t KvBlockPool::find_cached(KvBlockHash hash) const {
  const auto it = cached_.find(hash);
  return it == cached_.end() ? -1 : it->second;
}

bool KvBlockPool::cache(int32_t id, KvBlockHash hash) {
  KvBlock& b = held_block(id, "cache");
  LATHE_ASSERT(b.ref_cnt > 0 && !b.hash, "block ", id, " must be held and uncached to be cached");
  if (!cached_.try_emplace(hash, id).second) return false;
  b.hash = hash;
  return true;
}

}  // namespace lathe
