// The GGUF reader (io/gguf.h) on files written by the test writer (gguf_writer.h, following the spec):
// every metadata type read back, alignment and offsets, and a clear FormatError naming the file for every
// truncation point, a wrong magic, an unsupported version and a malformed tensor table.
#include <gtest/gtest.h>

#include "gguf_writer.h"
#include "lathe/base/error.h"
#include "lathe/io/gguf.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

template <class T>
std::string bytes_of(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
}

testing::GgufWriter every_type() {
  testing::GgufWriter w;
  w.raw("u8", GgufType::kU8, bytes_of<uint8_t>(200));
  w.raw("i8", GgufType::kI8, bytes_of<int8_t>(-100));
  w.raw("u16", GgufType::kU16, bytes_of<uint16_t>(60000));
  w.raw("i16", GgufType::kI16, bytes_of<int16_t>(-30000));
  w.u32("u32", 4000000000u);
  w.i32("i32", -2000000000);
  w.f32("f32", 0.25f);
  w.boolean("bool", true);
  w.str("string", "h\xC3\xA9llo");
  w.raw("u64", GgufType::kU64, bytes_of<uint64_t>(1ull << 40));
  w.raw("i64", GgufType::kI64, bytes_of<int64_t>(-(1ll << 40)));
  w.raw("f64", GgufType::kF64, bytes_of<double>(-1.5));
  w.strings("strings", {"a", "", "ccc"});
  w.f32s("floats", {1.f, -2.5f});
  w.i32s("ints", {7, -8, 9});
  // An array of two arrays of u8.
  std::string nested = bytes_of<uint32_t>(static_cast<uint32_t>(GgufType::kArray)) + bytes_of<uint64_t>(2);
  for (int k = 0; k < 2; ++k)
    nested += bytes_of<uint32_t>(static_cast<uint32_t>(GgufType::kU8)) + bytes_of<uint64_t>(1) + bytes_of<uint8_t>(k);
  w.raw("nested", GgufType::kArray, nested);
  w.u32("general.alignment", 64);
  w.tensor("a", {2, 32}, std::vector<float>(64, 1.5f), GgmlType::kF32);
  w.tensor("b", {3}, {1.f, 2.f, 3.f}, GgmlType::kF16);
  return w;
}

TEST(GgufReader, ReadsEveryMetadataTypeAndTensorInfo) {
  const std::string path = testing::scratch_dir("gguf_reader") + "/all.gguf";
  const testing::GgufWriter w = every_type();
  std::ofstream(path, std::ios::binary) << w.image(3, 64);
  const GgufFile g = GgufFile::open(path);
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 64u);
  EXPECT_EQ(g.data_offset() % 64, 0u);
  EXPECT_EQ(g.integer("u8"), 200);
  EXPECT_EQ(g.integer("i8"), -100);
  EXPECT_EQ(g.integer("u16"), 60000);
  EXPECT_EQ(g.integer("i16"), -30000);
  EXPECT_EQ(g.integer("u32"), 4000000000ll);
  EXPECT_EQ(g.integer("i32"), -2000000000);
  EXPECT_EQ(g.number("f32"), 0.25);
  EXPECT_TRUE(g.boolean_or("bool", false));
  EXPECT_EQ(g.string("string"), "h\xC3\xA9llo");
  EXPECT_EQ(g.integer("u64"), 1ll << 40);
  EXPECT_EQ(g.integer("i64"), -(1ll << 40));
  EXPECT_EQ(g.number("f64"), -1.5);
  EXPECT_EQ(g.find("strings")->strings, (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(g.find("floats")->floats, (std::vector<double>{1.0, -2.5}));
  EXPECT_EQ(g.find("ints")->ints, (std::vector<int64_t>{7, -8, 9}));
  const GgufValue* nested = g.find("nested");
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->items[1].ints, (std::vector<int64_t>{1}));
  EXPECT_EQ(g.keys().front(), "u8");
  // Tensors: PyTorch-order shapes, aligned offsets, zero-copy values.
  ASSERT_EQ(g.tensors().size(), 2u);
  EXPECT_EQ(g.tensor_info("a").shape, (Shape{2, 32}));
  EXPECT_EQ(g.tensor_info("b").offset % 64, 0u);
  EXPECT_EQ(g.tensor("a").to_vector(), std::vector<float>(64, 1.5f));
  EXPECT_EQ(g.tensor("b").to(DType::kF32).to_vector(), (std::vector<float>{1.f, 2.f, 3.f}));
  // Typed reads name the key and the type on a mismatch.
  try {
    g.string("u32");
    ADD_FAILURE();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("metadata 'u32' is UINT32, expected a STRING"), std::string::npos) << e.what();
  }
}

TEST(GgufReader, EveryTruncationIsAFormatErrorNamingTheFile) {
  const std::string img = every_type().image(3, 64);
  const GgufFile whole = GgufFile::parse(img.data(), img.size(), "whole.gguf");
  // The last tensor's bytes end here; past it there is only padding.
  const GgufTensorInfo& last = whole.tensors().back();
  const size_t end = whole.data_offset() + last.offset + last.nbytes;
  int n = 0;
  for (size_t cut = 0; cut < end; ++cut) {
    try {
      GgufFile::parse(img.data(), cut, "cut.gguf");
      ADD_FAILURE() << "no error when cut at " << cut;
    } catch (const FormatError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("cut.gguf: ", 0), 0u) << msg;
      EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("not a GGUF file") != std::string::npos)
          << "cut at " << cut << ": " << msg;
      ++n;
    }
  }
  EXPECT_EQ(n, static_cast<int>(end));
}

TEST(GgufReader, MagicVersionAndTensorTableAreChecked) {
  const auto error_of = [](std::string img) {
    try {
      GgufFile::parse(img.data(), img.size(), "bad.gguf");
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  testing::GgufWriter w;
  w.str("general.architecture", "llama");
  std::string img = w.image();
  EXPECT_NE(error_of("GGML" + img.substr(4)).find("not a GGUF file"), std::string::npos);
  EXPECT_EQ(error_of(w.image(2)), "no error");  // version 2 has version 3's layout (3 added big-endian files)
  EXPECT_NE(error_of(w.image(1)).find("GGUF version 1 is not supported"), std::string::npos);
  EXPECT_NE(error_of(w.image(4)).find("GGUF version 4 is not supported"), std::string::npos);
  // A tensor of an unknown type, one whose rows are not whole blocks, one at a misaligned offset.
  testing::GgufWriter t = w;
  t.raw_tensor("x", {1, 32}, static_cast<GgmlType>(31), std::string(32, '\0'));
  EXPECT_NE(error_of(t.image()).find("tensor 'x' has unknown ggml type 31"), std::string::npos);
  testing::GgufWriter r = w;
  r.raw_tensor("y", {1, 48}, GgmlType::kQ8_0, std::string(68, '\0'));
  EXPECT_NE(error_of(r.image()).find("has rows of 48 elements, not a multiple of its block of 32"), std::string::npos);
  testing::GgufWriter a = w;
  a.raw_tensor("z", {4}, GgmlType::kF32, std::string(16, '\0'));
  std::string misaligned = a.image();
  // The tensor's offset field follows its name, n_dims, one dim and type: 16 is not a multiple of 32.
  const size_t offset_field = misaligned.find(std::string("z", 1)) + 1 + 4 + 8 + 4;
  const uint64_t bad = 16;
  misaligned.replace(offset_field, 8, bytes_of(bad));
  EXPECT_NE(error_of(misaligned).find("tensor 'z' starts at data offset 16, not a multiple of the alignment 32"),
            std::string::npos)
      << error_of(misaligned);
  // A string whose length runs past the end.
  testing::GgufWriter s;
  s.raw("k", GgufType::kString, bytes_of<uint64_t>(1000) + "abc");
  EXPECT_NE(error_of(s.image()).find("truncated GGUF file: metadata 'k' needs 1000 bytes"), std::string::npos)
      << error_of(s.image());
}

}  // namespace
}  // namespace lathe
