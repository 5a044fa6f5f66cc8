#include "lathe/io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Every fixture model file is rewritten byte for byte from the tensors we read.
TEST(Safetensors, FixtureFilesRoundTripByteForByte) {
  const std::string root = testing::fixtures_root() + "/models";
  ASSERT_TRUE(std::filesystem::exists(root)) << root;
  const std::string out_dir = testing::scratch_dir("st_roundtrip");
  int n = 0;
  for (const auto& d : std::filesystem::directory_iterator(root)) {
    const std::string src = (d.path() / "model.safetensors").string();
    SafetensorsFile f = SafetensorsFile::open(src);
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& e : f.entries()) tensors.push_back({e.name, f.tensor(e.name)});
    const std::string dst = out_dir + "/" + d.path().filename().string() + ".safetensors";
    save_safetensors(dst, tensors, f.metadata());
    EXPECT_EQ(read_bytes(src), read_bytes(dst)) << src;
    ++n;
  }
  EXPECT_GT(n, 0);
}

TEST(Safetensors, MappedTensorsAreReadOnlyViews) {
  SafetensorsFile f = SafetensorsFile::open(testing::fixtures_root() + "/models/llama/model.safetensors");
  Tensor t = f.tensor("model.norm.weight");
  EXPECT_TRUE(t.storage()->read_only);
  EXPECT_EQ(t.dtype(), DType::kF32);
}

class SafetensorsBadInput : public ::testing::Test {
 protected:
  std::string dir_ = testing::scratch_dir("st_bad");
  std::string good_ = read_bytes(testing::fixtures_root() + "/models/llama/model.safetensors");
  std::string expect_error(const std::string& bytes) {
    const std::string p = dir_ + "/bad.safetensors";
    write_bytes(p, bytes);
    try {
      SafetensorsFile::open(p);
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << "error must name the file: " << msg;
      return msg;
    }
    ADD_FAILURE() << "no error";
    return "";
  }
  std::string with_header(const std::string& header) {
    std::string h = header;
    uint64_t n = h.size();
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out + h + std::string(16, '\0');
  }
};

TEST_F(SafetensorsBadInput, EmptyAndTinyFiles) {
  expect_error("");
  expect_error("abc");
}

TEST_F(SafetensorsBadInput, TruncatedData) {
  std::string msg = expect_error(good_.substr(0, good_.size() - 100));
  EXPECT_NE(msg.find("tensor '"), std::string::npos) << msg;
}

TEST_F(SafetensorsBadInput, TruncatedHeader) { expect_error(good_.substr(0, 200)); }

TEST_F(SafetensorsBadInput, HeaderLengthLies) {
  std::string b = good_;
  b[7] = 0x7f;  // enormous header length
  expect_error(b);
}

TEST_F(SafetensorsBadInput, OffsetsOutsideData) {
  std::string msg = expect_error(with_header(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,1600]}})"));
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST_F(SafetensorsBadInput, OffsetsDisagreeWithShape) {
  std::string msg = expect_error(with_header(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})"));
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
}

TEST_F(SafetensorsBadInput, OverlappingTensors) {
  expect_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"));
}

TEST_F(SafetensorsBadInput, UnsupportedDtype) {
  std::string msg = expect_error(with_header(R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})"));
  EXPECT_NE(msg.find("F8_E4M3"), std::string::npos) << msg;
}

TEST_F(SafetensorsBadInput, NotJson) { expect_error(with_header("{not json")); }

TEST_F(SafetensorsBadInput, NegativeShape) {
  expect_error(with_header(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})"));
}

}  // namespace
}  // namespace lathe
