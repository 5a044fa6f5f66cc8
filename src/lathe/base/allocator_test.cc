#include "lathe/base/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace lathe {
namespace {

uintptr_t address(const std::shared_ptr<void>& p) { return reinterpret_cast<uintptr_t>(p.get()); }

TEST(Allocator, SmallBlocksAre64ByteAlignedLargeOnes2MiB) {
  const Allocator alloc;
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
    const auto p = alloc.allocate(bytes);
    EXPECT_EQ(address(p) % 64, 0u) << bytes;
  }
  // From 2 MiB up a block starts on a huge-page boundary, so the kernel can back it with huge pages.
  for (size_t bytes : {size_t{2} << 20, (size_t{5} << 20) + 64}) {
    const auto p = alloc.allocate(bytes);
    EXPECT_EQ(address(p) % (size_t{2} << 20), 0u) << bytes;
    std::memset(p.get(), 1, bytes);  // all of it is usable
  }
}

TEST(Allocator, FreedLargeBlocksAreReusedBySize) {
  const Allocator alloc;
  uintptr_t first = 0;
  {
    const auto p = alloc.allocate(size_t{3} << 20);
    first = address(p);
  }
  EXPECT_EQ(alloc.cached_bytes(), size_t{3} << 20);
  const auto q = alloc.allocate(size_t{3} << 20);
  EXPECT_EQ(address(q), first);
  EXPECT_EQ(alloc.cached_bytes(), 0u);
}

}  // namespace
}  // namespace lathe
