#include "lathe/base/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <deque>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "lathe/base/error.h"

namespace lathe {
namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMaxRequest = size_t{1} << 62;  // larger: bad_alloc before any rounding can overflow

// Blocks of 2 MiB and more start on a 2 MiB boundary and ask for transparent huge pages (most kernels
// ship THP in "madvise" mode: nothing is huge unless asked). A GEMM packer reads hundreds of rows, each
// in its own 4 KiB page, and paid a TLB miss per row: huge pages made the training-step GEMMs 1-5%
// faster (/work-side A/B, same process, both tiers). The unused tail of the alignment is virtual only.
void* allocate_block(size_t bytes) {
  if (bytes < kHugePage) return std::aligned_alloc(64, bytes);
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, bytes) != 0) return nullptr;
  madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only: failure leaves 4 KiB pages
  return p;
}

void free_blocks(const std::vector<void*>& blocks) {
  for (void* p : blocks) std::free(p);
}
}  // namespace

// Every cached block is in `lru` (most recently freed first) and in its class's queue in `by_class`
// (oldest first). Within a class the two orders agree, so the global LRU block is the front of its
// class's queue and a request takes the back (the warmest block): both O(1).
struct Allocator::Cache {
  struct Block {
    void* p;
    size_t bytes;  // its class
  };
  using LruIter = std::list<Block>::iterator;

  std::mutex mu;
  std::list<Block> lru;
  std::unordered_map<size_t, std::deque<LruIter>> by_class;
  size_t max_cached = 0;
  AllocatorStats stats;

  ~Cache() {
    for (const Block& b : lru) std::free(b.p);
  }

  // The cache's bound: cached + live <= peak + swing, and cached <= max_cached.
  size_t budget() const {
    return std::min(max_cached, stats.peak_live_bytes - stats.live_bytes + stats.swing_bytes);
  }

  // Moves the least recently freed blocks to `victims` until cached_bytes <= target.
  void evict_to(size_t target, std::vector<void*>& victims) {
    while (stats.cached_bytes > target) {
      const LruIter oldest = std::prev(lru.end());
      const auto queue = by_class.find(oldest->bytes);
      LATHE_ASSERT(queue != by_class.end() && queue->second.front() == oldest, "allocator cache: LRU out of order");
      queue->second.pop_front();
      if (queue->second.empty()) by_class.erase(queue);
      victims.push_back(oldest->p);
      stats.cached_bytes -= oldest->bytes;
      ++stats.evictions;
      lru.pop_back();
    }
  }

  // A block of class `bytes` from the cache (a hit), or nullptr with the bound restored for a new one (a
  // miss: the new block counts as live, so older cached blocks make room for it).
  void* take(size_t bytes, std::vector<void*>& victims) {
    stats.live_bytes += bytes;  // a hit too may set a new peak (the swing lets cached + live exceed it)
    stats.peak_live_bytes = std::max(stats.peak_live_bytes, stats.live_bytes);
    const auto queue = by_class.find(bytes);
    if (queue == by_class.end()) {
      ++stats.misses;
      evict_to(budget(), victims);
      return nullptr;
    }
    const LruIter it = queue->second.back();
    queue->second.pop_back();
    if (queue->second.empty()) by_class.erase(queue);
    void* p = it->p;
    lru.erase(it);
    stats.cached_bytes -= bytes;
    ++stats.hits;
    return p;
  }

  // Gives a freed block of class `bytes` back: cached unless it alone exceeds max_cached (then freed).
  void put(void* p, size_t bytes, std::vector<void*>& victims) {
    stats.live_bytes -= bytes;
    stats.swing_bytes = std::max(stats.swing_bytes, stats.peak_live_bytes - stats.live_bytes);
    if (bytes > max_cached) {
      victims.push_back(p);
      return;
    }
    evict_to(budget() - bytes, victims);  // budget() >= bytes: peak - live >= bytes after this free
    lru.push_front({p, bytes});
    by_class[bytes].push_back(lru.begin());
    stats.cached_bytes += bytes;
  }
};

Allocator::Allocator(size_t max_cached_bytes) : cache_(std::make_shared<Cache>()) {
  cache_->max_cached = max_cached_bytes;
}

// 8 classes per octave: from 2^k up, steps of 2^k / 8, so a block exceeds its request by less than
// 2^k / 8 <= 12.5% of it. From 16 MiB up the steps are whole 2 MiB multiples (all huge pages); between
// 2 and 16 MiB they are 256 KiB to 1 MiB, a block's tail under 2 MiB on 4 KiB pages (2 MiB steps there
// would waste up to 50%).
size_t Allocator::block_bytes(size_t nbytes) {
  const size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded < kMinCachedBlock) return rounded;
  const size_t step = std::bit_floor(rounded) / kClassesPerOctave;
  return (rounded + step - 1) / step * step;
}

std::shared_ptr<void> Allocator::allocate(size_t nbytes) const {
  if (nbytes > kMaxRequest) throw std::bad_alloc();
  const size_t bytes = block_bytes(nbytes);
  if (bytes == 0) return std::shared_ptr<void>();
  const bool cached_class = bytes >= kMinCachedBlock;
  void* p = nullptr;
  if (cached_class) {
    std::vector<void*> victims;
    {
      std::lock_guard<std::mutex> lk(cache_->mu);
      p = cache_->take(bytes, victims);
    }
    free_blocks(victims);  // outside the lock: returning a large mapping to the kernel takes a while
  }
  if (!p) p = allocate_block(bytes);
  if (!p && cached_class) {
    release_cache();  // the cache may hold what the system lacks
    p = allocate_block(bytes);
  }
  if (!p) {
    if (cached_class) {
      std::lock_guard<std::mutex> lk(cache_->mu);
      cache_->stats.live_bytes -= bytes;
    }
    throw std::bad_alloc();
  }
  if (!cached_class) return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  std::shared_ptr<Cache> cache = cache_;
  return std::shared_ptr<void>(p, [cache, bytes](void* q) {
    std::vector<void*> victims;
    {
      std::lock_guard<std::mutex> lk(cache->mu);
      cache->put(q, bytes, victims);
    }
    free_blocks(victims);
  });
}

size_t Allocator::cached_bytes() const {
  std::lock_guard<std::mutex> lk(cache_->mu);
  return cache_->stats.cached_bytes;
}

AllocatorStats Allocator::stats() const {
  std::lock_guard<std::mutex> lk(cache_->mu);
  return cache_->stats;
}

void Allocator::release_cache() const {
  std::vector<void*> victims;
  {
    std::lock_guard<std::mutex> lk(cache_->mu);
    for (const Cache::Block& b : cache_->lru) victims.push_back(b.p);
    cache_->lru.clear();
    cache_->by_class.clear();
    cache_->stats.cached_bytes = 0;
  }
  free_blocks(victims);
}

}  // namespace lathe
