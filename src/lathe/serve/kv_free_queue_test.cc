// FreeKvBlockQueue: order (head = least recently freed), O(1) unlinking from the middle and the ends.
#include "lathe/serve/kv_free_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace lathe {
namespace {

std::vector<KvBlock> blocks(int n) {
  std::vector<KvBlock> b(n);
  for (int i = 0; i < n; ++i) b[i].id = i;
  return b;
}

TEST(FreeKvBlockQueue, StartsInOrderAndPopsTheHead) {
  std::vector<KvBlock> b = blocks(5);
  FreeKvBlockQueue q(b);
  EXPECT_EQ(q.size(), 5);
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.pop_front().id, 0);
  EXPECT_EQ(q.pop_front().id, 1);
  EXPECT_FALSE(q.contains(b[0]));
  EXPECT_TRUE(q.contains(b[2]));
  q.push_back(b[0]);  // freed again: to the tail
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{2, 3, 4, 0}));
  EXPECT_EQ(q.size(), 4);
}

// Removal only relinks the block's two neighbours: the rest of the queue keeps its order, and the
// removed block can be appended again.
TEST(FreeKvBlockQueue, RemovesFromTheMiddleAndTheEnds) {
  std::vector<KvBlock> b = blocks(6);
  FreeKvBlockQueue q(b);
  q.remove(b[3]);
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{0, 1, 2, 4, 5}));
  EXPECT_EQ(b[2].next, &b[4]);
  EXPECT_EQ(b[4].prev, &b[2]);
  EXPECT_EQ(b[3].prev, nullptr);
  EXPECT_EQ(b[3].next, nullptr);
  q.remove(b[0]);  // the head
  q.remove(b[5]);  // the tail
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(q.size(), 3);
  q.push_back(b[3]);
  q.push_back(b[0]);
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{1, 2, 4, 3, 0}));
  for (int i = 0; i < 5; ++i) q.pop_front();
  EXPECT_EQ(q.size(), 0);
  EXPECT_TRUE(q.ids().empty());
  q.push_back(b[5]);  // an emptied queue links again through its sentinels
  EXPECT_EQ(q.ids(), (std::vector<int32_t>{5}));
}

}  // namespace
}  // namespace lathe
