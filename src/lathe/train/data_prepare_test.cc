#include "lathe/train/data_prepare.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/train/byte_tokenizer.h"
#include "lathe/train/data_loader.h"

namespace lathe::train {
namespace {

// The quickstart's byte-level tokenizer: 256 byte tokens, <|endoftext|> = 256 is BOS (the delimiter).
std::string write_byte_tokenizer(const std::string& dir) {
  write_byte_level_tokenizer(dir);
  return dir;
}

TEST(DataPrepare, ShardsHoldEveryDocumentOnceBehindTheDelimiter) {
  const std::string dir = testing::scratch_dir("prepare");
  write_byte_tokenizer(dir);
  std::vector<std::string> docs;
  {
    std::ofstream jsonl(dir + "/a.jsonl");
    for (int i = 0; i < 300; ++i) {
      docs.push_back("doc " + std::to_string(i) + (i % 7 ? " says hi" : " with \"quotes\" and é"));
      jsonl << nlohmann::json{{"body", docs.back()}, {"id", i}}.dump() << "\n";
      if (i == 100) jsonl << "\n";  // blank lines are skipped
    }
    std::ofstream txt(dir + "/b.txt");
    for (int i = 0; i < 50; ++i) {
      docs.push_back("line " + std::to_string(i));
      txt << docs.back() << "\n";
    }
  }
  int progress_calls = 0;
  ThreadPool pool(2);
  const PrepareSummary sum = prepare_data({.inputs = {dir + "/a.jsonl", dir + "/b.txt"},
                                           .tokenizer = dir,
                                           .out_dir = dir + "/out",
                                           .name = "demo",
                                           .field = "body",
                                           .val_fraction = 0.1,
                                           .shard_tokens = 1000,
                                           .progress = [&](const PrepareProgress&) { ++progress_calls; }},
                                          pool);
  EXPECT_GT(progress_calls, 0);
  EXPECT_EQ(sum.delimiter_id, 256);
  EXPECT_EQ(sum.width, 2);
  EXPECT_EQ(sum.documents_train + sum.documents_val, 350);
  EXPECT_GT(sum.documents_val, 10);  // ~10% of 350
  EXPECT_LT(sum.documents_val, 60);
  EXPECT_GT(sum.train_shards.size(), 3u);  // 1000-token shards

  // Decoding every shard gives back exactly the input documents, each opened by the delimiter.
  const auto tok = tokenizer::Tokenizer::load(dir);
  std::multiset<std::string> got;
  int64_t tokens = 0;
  for (const auto& split : {"train", "val"}) {
    std::vector<uint32_t> all;
    for (const auto& path : find_shards(dir + "/out/demo", split)) {
      const TokenShard shard = TokenShard::open(path);
      for (int64_t i = 0; i < shard.size(); ++i) all.push_back(shard[i]);
    }
    tokens += static_cast<int64_t>(all.size());
    ASSERT_FALSE(all.empty());
    ASSERT_EQ(all[0], 256u);
    size_t start = 1;
    for (size_t i = 1; i <= all.size(); ++i) {
      if (i == all.size() || all[i] == 256) {
        got.insert(tok.decode(std::span(all).subspan(start, i - start)));
        start = i + 1;
      }
    }
  }
  EXPECT_EQ(tokens, sum.tokens_train + sum.tokens_val);
  EXPECT_EQ(got, std::multiset<std::string>(docs.begin(), docs.end()));

  const auto manifest = nlohmann::json::parse(std::ifstream(sum.manifest));
  EXPECT_EQ(manifest["delimiter_id"], 256);
  EXPECT_EQ(manifest["train"]["documents"], sum.documents_train);
}

TEST(DataPrepare, BadInputNamesFileAndLine) {
  const std::string dir = testing::scratch_dir("prepare_bad");
  write_byte_tokenizer(dir);
  std::ofstream(dir + "/bad.jsonl") << "{\"text\": \"ok\"}\n{\"text\": 3}\n";
  ThreadPool pool(1);
  try {
    prepare_data({.inputs = {dir + "/bad.jsonl"}, .tokenizer = dir, .out_dir = dir + "/out"}, pool);
    ADD_FAILURE() << "accepted a non-string field";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(prepare_data({.inputs = {dir + "/missing.txt"}, .tokenizer = dir, .out_dir = dir + "/o"}, pool), IoError);
  EXPECT_THROW(prepare_data({.inputs = {dir + "/bad.jsonl"}, .tokenizer = dir, .out_dir = dir + "/o", .delimiter = "<nope>"},
                            pool),
               InvalidArgument);
}

// The second preparation under a name replaces the first only once it has succeeded: a failed one leaves
// the first readable (read_manifest + find_shards), a successful one with fewer shards leaves only its own.
TEST(DataPrepare, ReplacesAnEarlierPreparationOnlyWhenItSucceeds) {
  namespace fs = std::filesystem;
  const std::string dir = testing::scratch_dir("prepare_replace");
  write_byte_tokenizer(dir);
  {
    std::ofstream text(dir + "/a.txt");
    for (int i = 0; i < 5000; ++i) text << "document number " << i << "\n";
  }
  ThreadPool pool(2);
  const PrepareOptions first{.inputs = {dir + "/a.txt"}, .tokenizer = dir, .out_dir = dir + "/out", .shard_tokens = 5000};
  const PrepareSummary sum = prepare_data(first, pool);
  ASSERT_GT(sum.train_shards.size(), 3u);
  const auto shards = find_shards(dir + "/out/data", "train");
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir + "/out")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const auto before = listing();

  std::ofstream(dir + "/bad.txt") << "fine\n" << std::string(3000, 'x') << "\nthen \xc0 bad\n";
  PrepareOptions second = first;
  second.inputs = {dir + "/a.txt", dir + "/bad.txt"};  // a first block (4096 documents) is written, then it fails
  EXPECT_THROW(prepare_data(second, pool), FormatError);
  EXPECT_EQ(listing(), before);
  EXPECT_EQ(find_shards(dir + "/out/data", "train"), shards);  // counts and widths as the manifest records

  std::ofstream(dir + "/small.txt") << "one\ntwo\n";
  second.inputs = {dir + "/small.txt"};
  const PrepareSummary small = prepare_data(second, pool);
  EXPECT_EQ(listing().size(), small.train_shards.size() + small.val_shards.size() + 1);
  EXPECT_EQ(find_shards(dir + "/out/data", "train").size(), small.train_shards.size());
}

// A scratch folder holding the byte tokenizer and a.txt, two one-line documents.
std::string two_documents_with_tokenizer(const std::string& name) {
  const std::string dir = testing::scratch_dir(name);
  write_byte_tokenizer(dir);
  std::ofstream(dir + "/a.txt") << "one document\nanother document\n";
  return dir;
}

// A run killed part-way left temporaries named with a pid that the next run has too (PID 1 in a container
// every time): the next run writes over them and commits, instead of deleting its own new shards.
TEST(DataPrepare, TemporariesOfADeadRunWithThisPidAreWrittenOverNotDeleted) {
  namespace fs = std::filesystem;
  const std::string dir = two_documents_with_tokenizer("prepare_same_pid");
  ThreadPool pool(2);
  const PrepareOptions opts{.inputs = {dir + "/a.txt"}, .tokenizer = dir, .out_dir = dir + "/out"};
  prepare_data(opts, pool);
  const std::string pid = std::to_string(::getpid());
  std::ofstream(dir + "/out/.data_train_000000.bin.tmp." + pid) << "junk of a killed run";
  std::ofstream(dir + "/out/.data_val_000000.bin.tmp." + pid) << "junk";
  const PrepareSummary again = prepare_data(opts, pool);
  EXPECT_EQ(find_shards(dir + "/out/data", "train").size(), again.train_shards.size());
  for (const auto& e : fs::directory_iterator(dir + "/out"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// The tokenizer's folder as --out: a second preparation there replaces the first (its manifest and shards
// are prepare's own outputs, not tokenizer files), and the tokenizer files are never touched.
TEST(DataPrepare, ReplacesAnEarlierPreparationInTheTokenizersFolder) {
  const std::string dir = two_documents_with_tokenizer("prepare_in_tokenizer_dir");
  ThreadPool pool(2);
  const PrepareOptions opts{.inputs = {dir + "/a.txt"}, .tokenizer = dir, .out_dir = dir};
  prepare_data(opts, pool);
  const std::string tokenizer = read_file(dir + "/tokenizer.json");
  EXPECT_NO_THROW(prepare_data(opts, pool));
  EXPECT_EQ(read_file(dir + "/tokenizer.json"), tokenizer);
  EXPECT_FALSE(find_shards(dir + "/data", "train").empty());
}

// A failed manifest write is part of the preparation: its shards go with it (no shards without a manifest
// for pretrain to glob), and the earlier preparation stays.
TEST(DataPrepare, AFailedManifestWriteLeavesNoShards) {
  namespace fs = std::filesystem;
  const std::string dir = testing::scratch_dir("prepare_manifest_fails");
  write_byte_tokenizer(dir);
  std::ofstream(dir + "/a.txt") << "one\ntwo\nthree\n";
  ThreadPool pool(1);
  PrepareOptions opts{.inputs = {dir + "/a.txt"}, .tokenizer = dir, .out_dir = dir + "/out", .name = "first"};
  prepare_data(opts, pool);
  const std::string first_manifest = read_file(dir + "/out/first.json");
  // The manifest's temporary name is taken by a folder that cannot be renamed over: its write fails.
  opts.name = "second";
  const std::string blocker = dir + "/out/.second.json.tmp." + std::to_string(::getpid());
  fs::create_directories(blocker + "/inside");
  EXPECT_THROW(prepare_data(opts, pool), IoError);
  fs::remove_all(blocker);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir + "/out"))
    if (e.path().filename().string().find("second") != std::string::npos) left.push_back(e.path().string());
  EXPECT_TRUE(left.empty()) << left.front();
  // And under the name of an earlier preparation: it is left as it was.
  opts.name = "first";
  fs::create_directories(dir + "/out/.first.json.tmp." + std::to_string(::getpid()) + "/inside");
  EXPECT_THROW(prepare_data(opts, pool), IoError);
  EXPECT_EQ(read_file(dir + "/out/first.json"), first_manifest);
  EXPECT_EQ(find_shards(dir + "/out/first", "train").size(), 1u);
}

}  // namespace
}  // namespace lathe::train
