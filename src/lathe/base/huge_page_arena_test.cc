// HugePageArena: buffers are carved in order, 64-byte aligned, from a block that starts on a 2 MiB
// boundary and is advised for transparent huge pages (checked in /proc/self/smaps); the block outlives the
// arena while a buffer holds it. Also memory_region_of, the smaps reader the check uses.
#include "lathe/base/huge_page_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "lathe/base/memory_region.h"

namespace lathe {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePageArena, CarvesAlignedBuffersInOrderUntilFull) {
  HugePageArena arena(1000);
  EXPECT_EQ(arena.capacity(), 1000u);
  char* a = static_cast<char*>(arena.take(1));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(address(a) % HugePageArena::kHugePage, 0u);  // the block starts on a huge-page boundary
  char* b = static_cast<char*>(arena.take(65));
  EXPECT_EQ(b, a + 64);   // 1 byte takes one 64-byte slot
  EXPECT_EQ(arena.used(), 64u + 128u);
  EXPECT_EQ(arena.take(0), nullptr);
  EXPECT_EQ(arena.take(1000 - 192 + 1), nullptr);  // one byte too many: nothing taken
  char* c = static_cast<char*>(arena.take(768));  // of the 808 bytes left
  EXPECT_EQ(c, a + 192);
  EXPECT_EQ(arena.take(1), nullptr);
  EXPECT_TRUE(arena.contains(a) && arena.contains(c) && arena.contains(a + 999));
  EXPECT_FALSE(arena.contains(a + 1000));
  EXPECT_FALSE(arena.contains(&arena));
  std::memset(a, 1, 1000);  // writable: the whole capacity is mapped
}

TEST(HugePageArena, EmptyArenaHasNoBlock) {
  HugePageArena arena(0);
  EXPECT_EQ(arena.take(1), nullptr);
  EXPECT_EQ(arena.owner(), nullptr);
  EXPECT_FALSE(arena.contains(nullptr));
}

TEST(HugePageArena, BlockOutlivesTheArenaWhileABufferHoldsIt) {
  std::shared_ptr<void> held;
  {
    HugePageArena arena(4096);
    void* p = arena.take(256);
    held = std::shared_ptr<void>(arena.owner(), p);  // how a tensor's storage holds it (arena_tensor.h)
    std::memset(p, 7, 256);
  }
  EXPECT_EQ(static_cast<const unsigned char*>(held.get())[255], 7);
}

// The block is one mapping advised MADV_HUGEPAGE; where the kernel allows THP it is eligible for huge
// pages. Whether it gets them depends on free memory (compaction), so AnonHugePages is reported, not required.
TEST(HugePageArena, BlockIsAdvisedForHugePages) {
  const std::string mode = transparent_huge_page_mode();
  if (mode.empty()) GTEST_SKIP() << "the kernel has no transparent huge pages";
  HugePageArena arena(6 * kMiB);
  char* p = static_cast<char*>(arena.take(6 * kMiB));
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 6 * kMiB);  // fault the pages in
  const std::optional<MemoryRegion> r = memory_region_of(p + 3 * kMiB);
  if (!r) GTEST_SKIP() << "no /proc/self/smaps";
  EXPECT_LE(r->begin, address(p));
  EXPECT_GE(r->end, address(p) + 6 * kMiB);
  EXPECT_TRUE(r->huge_page_advised);
  if (mode != "never") {
    EXPECT_TRUE(r->thp_eligible);
  }
  RecordProperty("anon_huge_kib", std::to_string(r->anon_huge_bytes / 1024));
}

TEST(MemoryRegion, FindsTheMappingOfAnAddress) {
  const std::vector<char> heap(3 * kMiB, 1);  // in a mapping of its own or in the heap
  const std::optional<MemoryRegion> r = memory_region_of(heap.data() + kMiB);
  if (!r) GTEST_SKIP() << "no /proc/self/smaps";
  EXPECT_LE(r->begin, address(heap.data()));
  EXPECT_GE(r->end, address(heap.data() + heap.size()));
  EXPECT_GE(r->rss_bytes, 2 * kMiB);  // written when filled
  EXPECT_FALSE(memory_region_of(nullptr).has_value());
  const std::string mode = transparent_huge_page_mode();
  EXPECT_TRUE(mode.empty() || mode == "always" || mode == "madvise" || mode == "never") << mode;
}

}  // namespace
}  // namespace lathe
