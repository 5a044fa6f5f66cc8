// 64-byte aligned memory (blocks of 2 MiB and more: 2 MiB aligned, on transparent huge pages) with a
// cache of large freed blocks. A training step frees and re-allocates the same large buffers
// (activations, gradients) every step; glibc returns blocks over 32 MiB to the kernel, so each step paid
// their page faults again (~11% of a GPT-2 step). Cached blocks are reused by exact size; the cache is
// bounded and lives in the Context (no global state).
#pragma once

#include <cstddef>
#include <memory>

namespace lathe {

class Allocator {
 public:
  explicit Allocator(size_t max_cached_bytes = size_t{1} << 30);
  // Returns an owner whose deleter gives the block back (to the cache when it is large and fits).
  std::shared_ptr<void> allocate(size_t nbytes) const;
  size_t cached_bytes() const;
  void release_cache() const;  // frees every cached block

 private:
  struct Cache;
  std::shared_ptr<Cache> cache_;  // shared with outstanding blocks: they may outlive the Allocator
};

}  // namespace lathe
