#include "lathe/base/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "lathe/base/error.h"

namespace lathe {

HugePageArena::HugePageArena(size_t capacity) {
  if (capacity == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  LATHE_CHECK_ARG(capacity <= SIZE_MAX - 2 * kHugePage, "[HugePageArena] capacity ", capacity, " is too large");
  const size_t length = (capacity + page - 1) / page * page;
  // mmap aligns to a page only: reserve 2 MiB more, then unmap the head before the first 2 MiB boundary
  // and what is left past the block.
  const size_t reserved = length + kHugePage;
  void* raw = ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw Error(str_cat("out of memory reserving ", capacity, " bytes of huge-page memory: ", std::strerror(errno)));
  const auto raw_addr = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (raw_addr + kHugePage - 1) / kHugePage * kHugePage;
  const size_t head = start - raw_addr, tail = reserved - head - length;
  if (head) ::munmap(raw, head);
  if (tail) ::munmap(reinterpret_cast<void*>(start + length), tail);
  void* block = reinterpret_cast<void*>(start);
  ::madvise(block, length, MADV_HUGEPAGE);  // advice only: EINVAL without THP leaves 4 KiB pages
  block_ = std::shared_ptr<void>(block, [length](void* p) { ::munmap(p, length); });
  capacity_ = capacity;
}

void* HugePageArena::take(size_t nbytes) {
  if (nbytes == 0 || nbytes > capacity_ || footprint(nbytes) > capacity_ - used_) return nullptr;
  void* p = static_cast<char*>(block_.get()) + used_;
  used_ += footprint(nbytes);
  return p;
}

bool HugePageArena::contains(const void* p) const {
  const auto* b = static_cast<const char*>(block_.get());
  const auto* q = static_cast<const char*>(p);
  return b && q >= b && q < b + capacity_;
}

}  // namespace lathe
