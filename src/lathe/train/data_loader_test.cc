#include "lathe/train/data_loader.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

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

// A format-2 manifest for shards "d_train_*" of make_shards, as `lathe data prepare` writes it.
nlohmann::json manifest_for(const std::vector<std::string>& shards, const std::vector<int>& sizes) {
  nlohmann::json names = nlohmann::json::array(), counts = nlohmann::json::array();
  int total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    names.push_back(std::filesystem::path(shards[i]).filename().string());
    counts.push_back(sizes[i]);
    total += sizes[i];
  }
  return {{"format", kManifestFormat},
          {"tokenizer", "../tok"},
          {"token_bytes", 2},
          {"train", {{"tokens", total}, {"shards", names}, {"shard_tokens", counts}}},
          {"val", {{"tokens", 0}, {"shards", nlohmann::json::array()}, {"shard_tokens", nlohmann::json::array()}}}};
}

TEST(DataLoader, ShardsComeFromTheManifestWithPathsRelativeToIt) {
  namespace fs = std::filesystem;
  const std::string dir = testing::scratch_dir("loader_manifest");
  fs::create_directories(dir + "/data");
  fs::create_directories(dir + "/tok");
  const std::vector<int> sizes = {50, 40};
  const auto shards = make_shards(dir + "/data", sizes);
  std::ofstream(dir + "/data/d.json") << manifest_for(shards, sizes).dump();
  make_shards(dir + "/data", {50, 40, 30});  // a third, stale shard the manifest does not list
  EXPECT_EQ(find_shards(dir + "/data/d", "train").size(), 2u);
  EXPECT_EQ(find_shards(dir + "/data", "train").size(), 2u);  // the folder's one manifest
  const nlohmann::json m = read_manifest(dir + "/data/d");
  EXPECT_EQ(fs::path(m["tokenizer"].get<std::string>()), fs::weakly_canonical(dir + "/tok"));
  EXPECT_EQ(manifest_tokenizer(read_manifest(dir + "/data/d")), m["tokenizer"].get<std::string>());
  EXPECT_THROW(find_shards(dir + "/data/d", "val"), IoError);  // listed none

  // A listed shard whose token count differs from the record, then one that is missing.
  write_token_shard(shards[1], std::vector<uint32_t>(41, 1), 2);
  EXPECT_THROW(find_shards(dir + "/data/d", "train"), FormatError);
  std::filesystem::remove(shards[1]);
  try {
    find_shards(dir + "/data/d", "train");
    ADD_FAILURE() << "accepted a missing shard";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("d_train_000001.bin"), std::string::npos) << e.what();
  }
  // A second preparation in the folder: the folder alone is ambiguous.
  std::ofstream(dir + "/data/e.json") << "{}";
  make_shards(dir + "/data", {50});
  std::filesystem::rename(dir + "/data/d_train_000000.bin", dir + "/data/e_train_000000.bin");
  EXPECT_THROW(find_shards(dir + "/data", "train"), InvalidArgument);
  // The recorded tokenizer is gone.
  std::filesystem::remove_all(dir + "/tok");
  EXPECT_THROW(manifest_tokenizer(read_manifest(dir + "/data/d")), IoError);
}

// Every number and string the manifest records is checked for type and range when it is read, naming the
// manifest and the key, so no raw JSON type error reaches a caller reading it typed.
TEST(DataLoader, ManifestValuesAreCheckedNamingTheKey) {
  const std::string dir = testing::scratch_dir("loader_manifest_values");
  const std::vector<int> sizes = {50, 40};
  const auto shards = make_shards(dir, sizes);
  nlohmann::json good = manifest_for(shards, sizes);
  good["vocab_size"] = 259;
  good["delimiter_id"] = 256;
  good["seed"] = 0;
  good["val_fraction"] = 0.01;
  std::ofstream(dir + "/d.json") << good.dump();
  ASSERT_EQ(find_shards(dir + "/d", "train").size(), 2u);
  using nlohmann::json;
  const std::vector<std::tuple<json::json_pointer, json, std::string>> cases = {
      {json::json_pointer("/delimiter_id"), "x", "delimiter_id"},
      {json::json_pointer("/delimiter_id"), -1, "delimiter_id"},
      {json::json_pointer("/delimiter_id"), 259, "delimiter_id"},  // not below vocab_size
      {json::json_pointer("/delimiter_id"), 1e20, "delimiter_id"},
      {json::json_pointer("/token_bytes"), 3, "token_bytes"},
      {json::json_pointer("/token_bytes"), "2", "token_bytes"},
      {json::json_pointer("/vocab_size"), 0, "vocab_size"},
      {json::json_pointer("/vocab_size"), 100000, "token_bytes"},  // 2-byte tokens cannot hold its ids
      {json::json_pointer("/format"), "2", "format"},
      {json::json_pointer("/format"), 0, "format"},
      {json::json_pointer("/format"), 2.5, "format"},
      {json::json_pointer("/seed"), -1, "seed"},
      {json::json_pointer("/val_fraction"), 1.5, "val_fraction"},
      {json::json_pointer("/delimiter"), 7, "delimiter"},
      {json::json_pointer("/inputs"), "a.txt", "inputs"},
      {json::json_pointer("/train/shard_tokens/0"), -50, "train.shard_tokens[0]"},
      {json::json_pointer("/train/shard_tokens/1"), "40", "train.shard_tokens[1]"},
      {json::json_pointer("/train/tokens"), -1, "train.tokens"},
      {json::json_pointer("/val/documents"), 18446744073709551615ull, "val.documents"},
  };
  for (const auto& [where, value, key] : cases) {
    SCOPED_TRACE(where.to_string() + " = " + value.dump());
    json bad = good;
    bad[where] = value;
    std::ofstream(dir + "/d.json") << bad.dump();
    for (const char* split : {"train", "val"}) {
      try {
        find_shards(dir + "/d", split);
        ADD_FAILURE() << "accepted";
      } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("d.json"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("\"" + key + "\""), std::string::npos) << e.what();
      }
    }
  }
}

TEST(DataLoader, WithoutAManifestShardsAreGlobbedWithANote) {
  const std::string dir = testing::scratch_dir("loader_glob");
  const auto shards = make_shards(dir, {50, 40});
  std::string note;
  EXPECT_EQ(find_shards(dir + "/d", "train", [&](const std::string& m) { note = m; }), shards);
  EXPECT_NE(note.find("no data manifest"), std::string::npos) << note;
}

}  // namespace
}  // namespace lathe::train
