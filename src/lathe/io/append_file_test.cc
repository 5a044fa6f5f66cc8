// AppendFile: appends land in the file; a failing device (/dev/full: ENOSPC) throws naming the path.
#include "lathe/io/append_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
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

}  // namespace
}  // namespace lathe
