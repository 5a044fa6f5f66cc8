#include "lathe/io/file_read.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FileRead, RefusesAnythingButARegularFileWithoutBlocking) {
  const std::string d = testing::scratch_dir("file_read");
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  fs::create_directory(d + "/dir");
  // A FIFO with no writer: a blocking open would hang this test.
  EXPECT_EQ(error_of([&] { read_file(d + "/fifo"); }), d + "/fifo: is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { MappedFile::open(d + "/fifo"); }), d + "/fifo: is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { read_file(d + "/dir"); }), d + "/dir: is a directory, not a regular file");
  EXPECT_EQ(error_of([&] { read_file("/dev/null"); }), "/dev/null: is a character device, not a regular file");
  EXPECT_NE(error_of([&] { read_file(d + "/missing"); }).find(d + "/missing: cannot open"), std::string::npos);
}

// A hostile model folder: config.json a symlink to a FIFO (it could as well point at a device, whose
// open has effects). The target must be refused from stat alone, never opened: inotify sees every open.
TEST(FileRead, RefusesASymlinkedSpecialFileWithoutOpeningIt) {
  const std::string d = testing::scratch_dir("file_read_symlink");
  ASSERT_EQ(::mkfifo((d + "/fifo").c_str(), 0644), 0);
  fs::create_symlink(d + "/fifo", d + "/config.json");
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(in, 0);
  ASSERT_GE(::inotify_add_watch(in, (d + "/fifo").c_str(), IN_OPEN), 0);
  auto opens = [&] {
    alignas(inotify_event) char buf[4096];
    int n = 0;
    for (ssize_t got; (got = ::read(in, buf, sizeof buf)) > 0;) {
      for (char* p = buf; p < buf + got; p += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(p)->len) ++n;
    }
    return n;
  };
  EXPECT_EQ(error_of([&] { read_file(d + "/config.json"); }), d + "/config.json: is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { read_json_object_file(d + "/config.json"); }),
            d + "/config.json: is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(error_of([&] { MappedFile::open(d + "/config.json"); }),
            d + "/config.json: is a FIFO (named pipe), not a regular file");
  EXPECT_EQ(opens(), 0);
  // The watch does see an open (so the check above can fail).
  const int fd = ::open((d + "/fifo").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(opens(), 1);
  ::close(in);
}

TEST(FileRead, ReadsAndChecksJsonObjects) {
  const std::string d = testing::scratch_dir("file_read_json");
  std::ofstream(d + "/a.json") << R"({"b": 1, "a": 2})";
  std::ofstream(d + "/arr.json") << "[1]";
  std::ofstream(d + "/bad.json") << "{";
  EXPECT_EQ(read_file(d + "/a.json"), R"({"b": 1, "a": 2})");
  EXPECT_EQ(read_json_object_file(d + "/a.json")["a"], 2);
  EXPECT_EQ(read_ordered_json_object_file(d + "/a.json").begin().key(), "b");  // file order kept
  EXPECT_EQ(error_of([&] { read_json_object_file(d + "/arr.json"); }), d + "/arr.json: must be a JSON object, got an array");
  EXPECT_NE(error_of([&] { read_json_object_file(d + "/bad.json"); }).find("not valid JSON"), std::string::npos);
}

TEST(FileRead, ParsesJsonObjectTextNamingWhere) {
  EXPECT_EQ(parse_json_object(R"({"a": [1]})", "m/x.json")["a"][0], 1);
  EXPECT_EQ(parse_ordered_json_object(R"({"z": 1, "a": 2})", "m/x.json").begin().key(), "z");
  EXPECT_EQ(error_of([] { parse_json_object("null", "m/x.json"); }), "m/x.json: must be a JSON object, got null");
  EXPECT_EQ(error_of([] { parse_json_object("[]", "m/x.json"); }), "m/x.json: must be a JSON object, got an array");
  EXPECT_EQ(error_of([] { parse_ordered_json_object("3", "m/x.json"); }), "m/x.json: must be a JSON object, got a number");
  EXPECT_TRUE(error_of([] { parse_json_object("{", "m/x.json"); }).starts_with("m/x.json: not valid JSON: "));
  EXPECT_THROW(parse_json_object("", "m/x.json"), FormatError);
}

}  // namespace
}  // namespace lathe
