// Checksums of checkpoint files: digest_file and digest_bytes agree, one flipped bit changes the XXH3-128
// digest, and a path that is not a regular file is refused like every other file lathe reads.
#include "lathe/io/checksum.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

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
