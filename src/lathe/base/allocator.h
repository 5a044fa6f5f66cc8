// 64-byte aligned memory (blocks of 2 MiB and more: 2 MiB aligned, on transparent huge pages) with a
// cache of large freed blocks. A training step frees and re-allocates the same large buffers
// (activations, gradients) every step; glibc returns blocks over 32 MiB to the kernel, so each step paid
// their page faults again (~11% of a GPT-2 step). The cache lives in the Context (no global state):
// - Blocks of >= 1 MiB come in size classes, 8 per octave (a request is rounded up to the next multiple
//   of 1/8 of its power of two: < 12.5% more than asked), so near sizes such as a server's
//   [sampled rows, V] logits share blocks. A request reuses a block of its own class only.
// - Bound: cached + live bytes (of these blocks) <= peak live + swing, where swing is the largest drop of
//   live bytes below their running peak so far (a training step: what it frees at its end; a server:
//   one step's tensors, not its weights). A training step's gradients sit in the cache while its
//   forward peaks, so the peak alone is too tight (GPT-2 124M, 2 x 256 tokens: peak + 22%); a server that sees every
//   logits size caches about two steps' worth instead of every size. Optionally also cached <= max_cached.
// - A block that would break the bound evicts the least recently freed blocks, of any class, first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace lathe {

struct AllocatorStats {
  size_t live_bytes = 0;       // blocks of >= 1 MiB handed out and not yet freed, by their class size
  size_t peak_live_bytes = 0;  // the largest live_bytes so far
  size_t swing_bytes = 0;      // the largest peak_live_bytes - live_bytes so far
  size_t cached_bytes = 0;     // freed blocks kept for reuse, by class size
  int64_t hits = 0;            // requests served from the cache
  int64_t misses = 0;          // requests of >= 1 MiB that found no block of their class
  int64_t evictions = 0;       // cached blocks freed to keep the bound
};

class Allocator {
 public:
  static constexpr size_t kMinCachedBlock = size_t{1} << 20;  // smaller blocks: glibc's free lists do well
  static constexpr size_t kClassesPerOctave = 8;

  static constexpr size_t kNoCap = SIZE_MAX;

  // max_cached_bytes: a fixed cap on top of the adaptive bound (none by default: a training step may need
  // more than any fixed number, and the bound already keeps the cache within peak + swing).
  explicit Allocator(size_t max_cached_bytes = kNoCap);
  // Returns an owner whose deleter gives the block back (to the cache when it is large). nbytes == 0:
  // an empty owner. Throws std::bad_alloc when the system has no memory left, even after the cache is freed.
  std::shared_ptr<void> allocate(size_t nbytes) const;
  // The bytes a request of nbytes occupies: rounded up to 64, and from kMinCachedBlock up to its class.
  static size_t block_bytes(size_t nbytes);

  size_t cached_bytes() const;
  AllocatorStats stats() const;
  void release_cache() const;  // frees every cached block

 private:
  struct Cache;
  std::shared_ptr<Cache> cache_;  // shared with outstanding blocks: they may outlive the Allocator
};

}  // namespace lathe
