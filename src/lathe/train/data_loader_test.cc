#include "lathe/train/data_loader.h"

#include <gtest/gtest.h>

#include <set>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::train {
namespace {

// Three shards whose token at position i of shard s is s * 10000 + i, so a token names its origin.
std::vector<std::string> make_shards(const std::string& dir, const std::vector<int>& sizes) {
  std::vector<std::string> paths;
  for (size_t s = 0; s < sizes.size(); ++s) {
    std::vector<uint32_t> tokens(sizes[s]);
    for (int i = 0; i < sizes[s]; ++i) tokens[i] = static_cast<uint32_t>(s * 10000 + i);
    paths.push_back(dir + "/d_train_00000" + std::to_string(s) + ".bin");
    write_token_shard(paths.back(), tokens, 2);
  }
  return paths;
}

TEST(DataLoader, OneEpochVisitsEveryWindowOnceWithShiftedTargets) {
  const std::string dir = testing::scratch_dir("loader_epoch");
  const int64_t T = 8;
  DataLoader loader({.shards = make_shards(dir, {81, 40, 9}), .seq_len = T, .seed = 7});
  ASSERT_EQ(loader.samples_per_epoch(), 10 + 4 + 1);  // (n - 1) / T windows per shard
  const Batch b = loader.batch_at(0, loader.samples_per_epoch());
  ASSERT_EQ(b.batch, loader.samples_per_epoch());
  std::set<int32_t> starts;
  for (int64_t r = 0; r < b.batch; ++r) {
    const int32_t first = b.inputs[r * T];
    EXPECT_EQ((first % 10000) % T, 0) << "windows start at multiples of T";
    starts.insert(first);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(b.inputs[r * T + t], first + t);
      EXPECT_EQ(b.targets[r * T + t], first + t + 1);
    }
  }
  EXPECT_EQ(starts.size(), static_cast<size_t>(b.batch)) << "a window was repeated";
  // Shuffled: not the shard order.
  std::vector<int32_t> in_order(starts.begin(), starts.end());
  std::vector<int32_t> seen;
  for (int64_t r = 0; r < b.batch; ++r) seen.push_back(b.inputs[r * T]);
  EXPECT_NE(seen, in_order);
}

TEST(DataLoader, OrderIsAFunctionOfSeedAndEpoch) {
  const std::string dir = testing::scratch_dir("loader_seed");
  const auto shards = make_shards(dir, {200, 150});
  DataLoader a({.shards = shards, .seq_len = 4, .seed = 1});
  DataLoader b({.shards = shards, .seq_len = 4, .seed = 1});
  DataLoader c({.shards = shards, .seq_len = 4, .seed = 2});
  const int64_t n = a.samples_per_epoch();
  EXPECT_EQ(a.batch_at(0, n).inputs, b.batch_at(0, n).inputs);
  EXPECT_NE(a.batch_at(0, n).inputs, c.batch_at(0, n).inputs);
  EXPECT_NE(a.batch_at(0, n).inputs, a.batch_at(n, n).inputs) << "epoch 2 repeats epoch 1's order";
  // Unshuffled: shard order, windows in order.
  DataLoader v({.shards = shards, .seq_len = 4, .shuffle = false});
  const Batch vb = v.batch_at(0, 3);
  EXPECT_EQ(vb.inputs[0], 0);
  EXPECT_EQ(vb.inputs[4], 4);
  EXPECT_EQ(vb.inputs[8], 8);
}

TEST(DataLoader, RanksSplitTheGlobalBatchAndNextResumesFromAnyCursor) {
  const std::string dir = testing::scratch_dir("loader_ranks");
  const auto shards = make_shards(dir, {300, 220, 97});
  const int64_t T = 6;
  DataLoader loader({.shards = shards, .seq_len = T, .seed = 3});
  const Batch whole = loader.batch_at(10, 6);
  for (int world : {2, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      const Batch part = loader.batch_at(10, 6, rank, world);
      int64_t r = 0;
      for (int64_t k = 10; k < 16; ++k) {
        if (k % world != rank) continue;
        const int64_t row = k - 10;
        EXPECT_TRUE(std::equal(part.inputs.begin() + r * T, part.inputs.begin() + (r + 1) * T,
                               whole.inputs.begin() + row * T));
        ++r;
      }
      EXPECT_EQ(r, part.batch);
    }
  }
  // next() (with its background prefetch) gives batch_at(cursor) step after step, also after a seek.
  DataLoader streaming({.shards = shards, .seq_len = T, .seed = 3});
  for (int step = 0; step < 5; ++step) EXPECT_EQ(streaming.next(4).inputs, loader.batch_at(step * 4, 4).inputs);
  EXPECT_EQ(streaming.cursor(), 20);
  streaming.seek(7);
  EXPECT_EQ(streaming.next(4).inputs, loader.batch_at(7, 4).inputs);
  EXPECT_EQ(streaming.next(4, 1, 2).inputs, loader.batch_at(11, 4, 1, 2).inputs);
}

TEST(DataLoader, DocumentPositionsRestartAtTheDelimiter) {
  const std::string dir = testing::scratch_dir("loader_docs");
  // 9 opens each document: [9 a b] [9 c] [9 d e f ...]
  write_token_shard(dir + "/d_train_000000.bin", std::vector<uint32_t>{9, 1, 2, 9, 3, 9, 4, 5, 6}, 2);
  DataLoader loader({.shards = {dir + "/d_train_000000.bin"}, .seq_len = 8, .shuffle = false, .delimiter_id = 9});
  const Batch b = loader.batch_at(0, 1);
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 1, 2}));
  EXPECT_EQ(b.segments, (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 2}));
}

TEST(DataLoader, ClearErrors) {
  const std::string dir = testing::scratch_dir("loader_errors");
  const auto shards = make_shards(dir, {5});
  EXPECT_THROW(DataLoader({.shards = shards, .seq_len = 8}), InvalidArgument);  // too short for one window
  EXPECT_THROW(find_shards(dir, "val"), IoError);
  EXPECT_EQ(find_shards(dir, "train"), shards);
  EXPECT_EQ(find_shards(dir + "/d", "train"), shards);  // a name prefix works too
  DataLoader loader({.shards = shards, .seq_len = 2, .vocab_limit = 3});
  EXPECT_THROW(loader.batch_at(0, 2), FormatError);  // ids 3 and 4 are outside a 3-token vocabulary
}

}  // namespace
}  // namespace lathe::train
