#include "lathe/io/line_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  LineReader r = LineReader::open(path);
  std::vector<std::string> out;
  for (std::string l; r.next(l);) out.push_back(l);
  return out;
}

TEST(LineReader, SplitsLinesAsGetlineDoes) {
  const std::string d = testing::scratch_dir("line_reader");
  std::ofstream(d + "/a.txt", std::ios::binary) << "one\n\ntwo\r\nlast";
  EXPECT_EQ(lines_of(d + "/a.txt"), (std::vector<std::string>{"one", "", "two\r", "last"}));
  std::ofstream(d + "/b.txt", std::ios::binary) << "x\n";
  EXPECT_EQ(lines_of(d + "/b.txt"), (std::vector<std::string>{"x"}));
  std::ofstream(d + "/empty.txt", std::ios::binary) << "";
  EXPECT_TRUE(lines_of(d + "/empty.txt").empty());
  // Lines longer than the 1 MiB buffer, and a '\n' right at a buffer boundary.
  const std::string big(3 << 20, 'q'), edge((1 << 20) - 1, 'e');
  std::ofstream(d + "/big.txt", std::ios::binary) << edge << "\n" << big << "\nend\n";
  EXPECT_EQ(lines_of(d + "/big.txt"), (std::vector<std::string>{edge, big, "end"}));
  EXPECT_EQ(LineReader::open(d + "/big.txt").size(), edge.size() + big.size() + 6);
}

TEST(LineReader, RefusesAFifoOrFolderWithoutBlocking) {
  const std::string d = testing::scratch_dir("line_reader_fifo");
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  try {
    LineReader::open(d + "/fifo");
    ADD_FAILURE() << "a FIFO was opened";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), d + "/fifo: is a FIFO (named pipe), not a regular file");
  }
  EXPECT_THROW(LineReader::open(d), IoError);
  EXPECT_THROW(LineReader::open(d + "/missing"), IoError);
}

}  // namespace
}  // namespace lathe
