#include "lathe/base/allocator.h"

#include <sys/mman.h>

#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

namespace lathe {
namespace {
constexpr size_t kMinCachedBlock = size_t{1} << 20;  // smaller blocks: glibc's own free lists do well
constexpr size_t kHugePage = size_t{2} << 20;

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
}  // namespace

struct Allocator::Cache {
  std::mutex mu;
  std::unordered_multimap<size_t, void*> free_blocks;  // rounded size -> block
  size_t cached = 0, max_cached = 0;
  ~Cache() {
    for (auto& [size, p] : free_blocks) std::free(p);
  }
};

Allocator::Allocator(size_t max_cached_bytes) : cache_(std::make_shared<Cache>()) {
  cache_->max_cached = max_cached_bytes;
}

std::shared_ptr<void> Allocator::allocate(size_t nbytes) const {
  const size_t rounded = (nbytes + 63) / 64 * 64;
  if (rounded == 0) return std::shared_ptr<void>();
  void* p = nullptr;
  if (rounded >= kMinCachedBlock) {
    std::lock_guard<std::mutex> lk(cache_->mu);
    auto it = cache_->free_blocks.find(rounded);
    if (it != cache_->free_blocks.end()) {
      p = it->second;
      cache_->free_blocks.erase(it);
      cache_->cached -= rounded;
    }
  }
  if (!p) p = allocate_block(rounded);
  if (!p) throw std::bad_alloc();
  std::shared_ptr<Cache> cache = cache_;
  return std::shared_ptr<void>(p, [cache, rounded](void* q) {
    if (rounded >= kMinCachedBlock) {
      std::lock_guard<std::mutex> lk(cache->mu);
      if (cache->cached + rounded <= cache->max_cached) {
        cache->free_blocks.emplace(rounded, q);
        cache->cached += rounded;
        return;
      }
    }
    std::free(q);
  });
}

size_t Allocator::cached_bytes() const {
  std::lock_guard<std::mutex> lk(cache_->mu);
  return cache_->cached;
}

void Allocator::release_cache() const {
  std::lock_guard<std::mutex> lk(cache_->mu);
  for (auto& [size, p] : cache_->free_blocks) std::free(p);
  cache_->free_blocks.clear();
  cache_->cached = 0;
}

}  // namespace lathe
