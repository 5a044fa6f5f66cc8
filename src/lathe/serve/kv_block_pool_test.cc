// KvBlockPool: the null block, ref counts of shared blocks, LRU eviction of free cached blocks.
#include "lathe/serve/kv_block_pool.h"

#include <gtest/gtest.h>

#include <vector>

#include "lathe/base/error.h"

namespace lathe {
namespace {

TEST(KvBlockPool, NeverHandsOutTheNullBlock) {
  KvBlockPool pool(5);
  EXPECT_EQ(pool.n_free(), 4);
  std::vector<int32_t> got;
  pool.allocate(4, got);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_THROW(pool.allocate(1, got), InvalidArgument);  // refused: nothing taken
  EXPECT_EQ(got.size(), 4u);
  pool.free(got);
  EXPECT_EQ(pool.n_free(), 4);
  const std::vector<int32_t> null = {0};
  EXPECT_THROW(pool.free(null), InvalidArgument);
  EXPECT_THROW(pool.touch(null), InvalidArgument);
  EXPECT_EQ(pool.block(0).ref_cnt, 0);
  EXPECT_FALSE(pool.free_queue().contains(pool.block(0)));
  EXPECT_THROW(KvBlockPool{1}, InvalidArgument);
}

TEST(KvBlockPool, SharedBlocksAreFreeOnlyWhenTheLastHolderFrees) {
  KvBlockPool pool(4);
  std::vector<int32_t> a;
  pool.allocate(2, a);  // {1, 2}
  const std::vector<int32_t> shared = {1};
  pool.touch(shared);  // a second request shares block 1
  EXPECT_EQ(pool.block(1).ref_cnt, 2);
  pool.free(a);
  EXPECT_EQ(pool.block(1).ref_cnt, 1);
  EXPECT_EQ(pool.block(2).ref_cnt, 0);
  EXPECT_EQ(pool.free_queue().ids(), (std::vector<int32_t>{3, 2}));
  pool.free(shared);
  EXPECT_EQ(pool.free_queue().ids(), (std::vector<int32_t>{3, 2, 1}));
  // Touching a free block takes it out of the middle of the queue.
  const std::vector<int32_t> two = {2};
  pool.touch(two);
  EXPECT_EQ(pool.block(2).ref_cnt, 1);
  EXPECT_EQ(pool.free_queue().ids(), (std::vector<int32_t>{3, 1}));
}

// Freed cached blocks stay findable; allocation reuses the least recently freed first and forgets its
// hash then.
TEST(KvBlockPool, EvictsFreeCachedBlocksInLruOrder) {
  KvBlockPool pool(4);
  std::vector<int32_t> held;
  pool.allocate(3, held);  // {1, 2, 3}
  for (int32_t id : held) EXPECT_TRUE(pool.cache(id, 100 + id));
  EXPECT_EQ(pool.n_cached(), 3);
  // Freed in the order 2, 3, 1: the LRU order.
  for (int32_t id : {2, 3, 1}) {
    const std::vector<int32_t> one = {id};
    pool.free(one);
  }
  for (int32_t id : held) EXPECT_EQ(pool.find_cached(100 + id), id) << "a free cached block is still findable";
  std::vector<int32_t> got;
  pool.allocate(1, got);
  EXPECT_EQ(got, (std::vector<int32_t>{2}));
  EXPECT_EQ(pool.find_cached(102), -1);
  EXPECT_FALSE(pool.block(2).hash.has_value());
  EXPECT_EQ(pool.find_cached(103), 3);
  pool.allocate(1, got);
  EXPECT_EQ(got.back(), 3);
  EXPECT_EQ(pool.find_cached(103), -1);
  EXPECT_EQ(pool.find_cached(101), 1);
  EXPECT_EQ(pool.n_cached(), 1);
}

TEST(KvBlockPool, OneBlockPerHash) {
  KvBlockPool pool(4);
  std::vector<int32_t> held;
  pool.allocate(2, held);
  EXPECT_TRUE(pool.cache(1, 7));
  EXPECT_FALSE(pool.cache(2, 7));  // the same prefix computed twice: the second copy stays plain
  EXPECT_EQ(pool.find_cached(7), 1);
  EXPECT_FALSE(pool.block(2).hash.has_value());
}

}  // namespace
}  // namespace lathe
