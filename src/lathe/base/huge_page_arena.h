// One block of memory on transparent huge pages that many long-lived buffers of known total size are
// carved from: a model's weights (models/model.cc). A decode GEMV walks every row of every weight, and a
// weight under 2 MiB got its own 4 KiB pages (or the checkpoint's page-cache pages): a TLB miss per
// page. Carving all weights from one 2 MiB-aligned, MADV_HUGEPAGE block puts them on 2 MiB pages with
// no per-weight rounding (each buffer is 64-byte aligned, so the waste is < 64 bytes a buffer).
#pragma once

#include <cstddef>
#include <memory>

namespace lathe {

class HugePageArena {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kAlignment = 64;  // of every buffer: a cache line, what the kernels assume

  // The bytes a buffer of nbytes takes from the arena: nbytes rounded up to kAlignment.
  static size_t footprint(size_t nbytes) { return (nbytes + kAlignment - 1) / kAlignment * kAlignment; }

  // Reserves `capacity` bytes (rounded up to whole 4 KiB pages; nothing when 0) as an anonymous mapping
  // that starts on a 2 MiB boundary, advised MADV_HUGEPAGE. Only whole 2 MiB ranges can be huge, so a
  // tail past the last boundary stays on 4 KiB pages (rounding the block up to 2 MiB would cost up to
  // 2 MiB of memory once touched). Without THP the advice fails and the block is plain memory.
  // Throws Error when the system refuses the mapping.
  explicit HugePageArena(size_t capacity);

  // The next footprint(nbytes) bytes, or nullptr when they do not fit (or nbytes == 0). Not thread-safe:
  // one loader fills an arena.
  void* take(size_t nbytes);
  // Owns the whole block: a buffer's owner is an alias of it, so the block is unmapped when the arena and
  // every buffer taken from it are gone.
  const std::shared_ptr<void>& owner() const { return block_; }
  bool contains(const void* p) const;

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }

 private:
  std::shared_ptr<void> block_;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

}  // namespace lathe
