// AppendFile: appends land in the file; a failing device (/dev/full: ENOSPC) throws naming the path.
#include "lathe/io/append_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/checksum.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

TEST(AppendFile, AppendsAndReportsAFullDevice) {
  const std::string path = testing::scratch_dir("append_file") + "/log.jsonl";
  {
    AppendFile f = AppendFile::open(path);
    f.append("a\n");
    f.append("bc\n");
    f.sync();
  }
  AppendFile::open(path).append("d\n");
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "a\nbc\nd\n");

  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  AppendFile full = AppendFile::open("/dev/full");
  try {
    full.append("x\n");
    ADD_FAILURE() << "a write to /dev/full succeeded";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: write failed: No space left on device"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(AppendFile::open(path + "/not/a/dir"), IoError);
}

TEST(Checksum, FileAndBytesAgreeAndSeeOneBit) {
  const std::string path = testing::scratch_dir("checksum") + "/f.bin";
  std::string bytes(3 << 20, '\0');  // over the 1 MiB read chunk
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131);
  std::ofstream(path, std::ios::binary) << bytes;
  const FileDigest d = digest_file(path);
  EXPECT_EQ(d, digest_bytes(bytes.data(), bytes.size()));
  EXPECT_EQ(d.size, bytes.size());
  EXPECT_EQ(d.xxh3_128.size(), 32u);
  bytes[12345] ^= 1;
  EXPECT_NE(digest_bytes(bytes.data(), bytes.size()).xxh3_128, d.xxh3_128);
  EXPECT_THROW(digest_file(path + ".missing"), IoError);
  // The same refusals, with the same words, as every other file lathe reads (open_regular_file).
  const std::string dir = testing::scratch_dir("checksum_dir");
  auto message = [](const std::string& p) {
    try {
      digest_file(p);
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(dir), dir + ": is a directory, not a regular file");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  EXPECT_EQ(message(dir + "/fifo"), dir + "/fifo: is a FIFO (named pipe), not a regular file");  // no hang
}

}  // namespace
}  // namespace lathe
