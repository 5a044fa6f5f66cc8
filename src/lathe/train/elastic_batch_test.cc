#include "lathe/train/elastic_batch.h"

#include <gtest/gtest.h>

namespace lathe::train {
namespace {

TEST(ElasticBatch, FewerRanksAccumulateMoreAtTheSameMicroBatch) {
  // The recipe: 4 sequences over 2 ranks (2 each), no accumulation. On 1 rank: 2 sequences, accum 2.
  const auto one = split_global_batch(4, 1, 8, 2, 1);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->batch_size, 2);
  EXPECT_EQ(one->grad_accum, 2);
  EXPECT_EQ(one->eval_batches, 16);  // the same 32 validation sequences
  EXPECT_TRUE(one->eval_kept);
  const auto two = split_global_batch(4, 1, 8, 2, 2);  // the full job: the recipe unchanged
  ASSERT_TRUE(two);
  EXPECT_EQ(two->batch_size, 4);
  EXPECT_EQ(two->grad_accum, 1);
  EXPECT_EQ(two->eval_batches, 8);
}

TEST(ElasticBatch, KeepsTheGlobalBatchOrRefuses) {
  for (int64_t b : {4, 6, 8, 12, 24})
    for (int64_t a : {1, 2, 3})
      for (int ref : {1, 2, 4})
        for (int w = 1; w <= 6; ++w) {
          const auto s = split_global_batch(b, a, 3, ref, w);
          if ((b * a) % w != 0) {
            EXPECT_FALSE(s) << b << " " << a << " " << w;
            continue;
          }
          ASSERT_TRUE(s);
          EXPECT_EQ(s->batch_size * s->grad_accum, b * a);
          EXPECT_EQ(s->batch_size % w, 0);
          EXPECT_LE(s->batch_size / w, std::max<int64_t>(1, b / ref)) << "per-rank micro-batch grew";
          EXPECT_GE(s->eval_batches * s->batch_size, 3 * b);
        }
}

TEST(ElasticBatch, WorldSizeIsTheLargestThatKeepsTheBatch) {
  EXPECT_EQ(elastic_world_size(4, 1, 1, 4, 8), 4);
  EXPECT_EQ(elastic_world_size(4, 1, 1, 4, 3), 2);  // 3 ranks cannot split 4 sequences
  EXPECT_EQ(elastic_world_size(6, 1, 1, 4, 4), 3);
  EXPECT_EQ(elastic_world_size(4, 1, 3, 4, 3), 0);  // 3 available, none of [3, 3] divides 4
  EXPECT_EQ(elastic_world_size(4, 1, 1, 2, 0), 0);
}

// GRPO: every rank's share holds whole groups of num_generations completions.
TEST(ElasticBatch, GroupsStayWholeOnEachRank) {
  EXPECT_EQ(elastic_world_size(16, 1, 1, 8, 8, 4), 4);  // 4 completions per rank: one group each
  EXPECT_EQ(elastic_world_size(16, 1, 1, 8, 3, 4), 2);
  EXPECT_EQ(elastic_world_size(8, 2, 1, 8, 8, 8), 2);   // global 16 = 2 groups of 8
  EXPECT_EQ(elastic_world_size(8, 1, 2, 4, 4, 8), 0);   // one group of 8: no split over 2 or more ranks
  for (int64_t b : {8, 16, 24})
    for (int64_t a : {1, 2})
      for (int w = 1; w <= 6; ++w) {
        const auto s = split_global_batch(b, a, 1, 2, w, 4);
        if ((b * a) % (4 * w) != 0) {
          EXPECT_FALSE(s) << b << " " << a << " " << w;
          continue;
        }
        ASSERT_TRUE(s);
        EXPECT_EQ(s->batch_size * s->grad_accum, b * a);
        EXPECT_EQ(s->batch_size % w, 0);
        EXPECT_EQ(b * a / w % 4, 0);  // a rank's share of the step
      }
}

}  // namespace
}  // namespace lathe::train
