#include "lathe/train/token_shard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::train {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string error_of(const std::string& path) {
  try {
    TokenShard::open(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenShard, RoundTripsBothWidthsInLlmcLayout) {
  const std::string dir = testing::scratch_dir("token_shard");
  for (int width : {2, 4}) {
    const std::vector<uint32_t> tokens = {0, 1, 65535, 42, width == 4 ? 128255u : 7u};
    const std::string path = dir + "/w" + std::to_string(width) + "_train_000000.bin";
    write_token_shard(path, tokens, width);
    const std::string bytes = read_all(path);
    ASSERT_EQ(bytes.size(), kShardHeaderBytes + tokens.size() * width);
    int32_t header[3];
    std::memcpy(header, bytes.data(), sizeof(header));
    EXPECT_EQ(header[0], width == 2 ? 20240520 : 20240801);
    EXPECT_EQ(header[1], width == 2 ? 1 : 7);
    EXPECT_EQ(header[2], static_cast<int32_t>(tokens.size()));
    const TokenShard shard = TokenShard::open(path);
    ASSERT_EQ(shard.size(), static_cast<int64_t>(tokens.size()));
    EXPECT_EQ(shard.width(), width);
    std::vector<int32_t> got(tokens.size());
    shard.read(0, shard.size(), got.data());
    for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(static_cast<uint32_t>(got[i]), tokens[i]);
  }
}

TEST(TokenShard, RejectsTokensTooWideForUint16) {
  const std::string dir = testing::scratch_dir("token_shard_wide");
  EXPECT_THROW(write_token_shard(dir + "/x.bin", std::vector<uint32_t>{65536}, 2), InvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.bin"));  // nothing half-written is left behind
}

TEST(TokenShard, CorruptFilesNameTheFileAndOffset) {
  const std::string dir = testing::scratch_dir("token_shard_bad");
  const std::string good = dir + "/good.bin";
  write_token_shard(good, std::vector<uint32_t>{5, 6, 7, 8}, 2);
  const std::string bytes = read_all(good);

  struct Case {
    std::string name, bytes, expect_in_message;
  };
  std::string bad_magic = bytes, bad_version = bytes, lying_count = bytes;
  const int32_t magic = 12345, version = 3, count = 1000;
  std::memcpy(bad_magic.data(), &magic, 4);
  std::memcpy(bad_version.data() + 4, &version, 4);
  std::memcpy(lying_count.data() + 8, &count, 4);
  const std::vector<Case> cases = {
      {"header_cut", bytes.substr(0, 100), "ends at offset 100"},
      {"body_cut", bytes.substr(0, bytes.size() - 3), "ends at offset 1029"},
      {"trailing", bytes + "xyz", "from offset 1032"},
      {"bad_magic", bad_magic, "magic 12345 at offset 0"},
      {"bad_version", bad_version, "version 3 at offset 4"},
      {"lying_count", lying_count, "promises 1000 tokens"},
  };
  for (const auto& c : cases) {
    const std::string path = dir + "/" + c.name + ".bin";
    write_all(path, c.bytes);
    const std::string msg = error_of(path);
    EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.expect_in_message), std::string::npos) << c.name << ": " << msg;
  }
  // Out-of-vocabulary ids are reported with their byte offset.
  const TokenShard shard = TokenShard::open(good);
  std::vector<int32_t> out(4);
  try {
    shard.read(0, 4, out.data(), /*vocab_limit=*/7);
    ADD_FAILURE() << "id 7 accepted with a vocabulary of 7";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 7 at offset 1028"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe::train
