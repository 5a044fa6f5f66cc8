#include "lathe/io/file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lathe/base/error.h"

namespace lathe {
namespace {

// e.g. "config.json: must be a JSON object, got an array".
std::string json_not_object_message(const std::string& what, const char* type_name) {
  const std::string t(type_name);
  const bool vowel = !t.empty() && std::strchr("aeiou", t[0]) != nullptr;
  return str_cat(what, ": must be a JSON object, got ", t == "null" ? "null" : (vowel ? "an " : "a ") + t);
}


const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

template <class Json>
Json parse_object(const std::string& text, const std::string& where) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(str_cat(where, ": not valid JSON: ", e.what()));
  }
  if (!j.is_object()) throw FormatError(json_not_object_message(where, j.type_name()));
  return j;
}

}  // namespace

std::string not_regular_file_message(const std::string& path, mode_t mode) {
  return str_cat(path, ": is ", file_kind(mode), ", not a regular file");
}

RegularFile open_regular_file(const std::string& path) {
  // stat before open: opening a device or a FIFO has effects of its own (a tape rewinds, a terminal
  // becomes the controlling one, a FIFO's writer is released), so a path that is not a regular file,
  // also behind a symlink planted in a model folder, is refused without ever being opened.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(str_cat(path, ": cannot open: ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw IoError(not_regular_file_message(path, st.st_mode));
  // The path may be replaced between stat and open: O_NONBLOCK keeps the open of a FIFO swapped in from
  // waiting for a writer (on a regular file it changes nothing), and fstat checks what was opened.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError(str_cat(path, ": cannot open: ", std::strerror(errno)));
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw IoError(str_cat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError(not_regular_file_message(path, st.st_mode));
  }
  return RegularFile{fd, static_cast<size_t>(st.st_size)};
}

std::string read_file(const std::string& path) {
  const RegularFile f = open_regular_file(path);
  std::string out(f.size, '\0');
  size_t done = 0;
  while (true) {
    if (done == out.size()) out.resize(out.size() + 4096);  // the file may have grown since fstat
    const ssize_t n = ::read(f.fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(f.fd);
      throw IoError(str_cat(path, ": read failed: ", std::strerror(err)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(f.fd);
  out.resize(done);
  return out;
}

std::string json_for_message(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

nlohmann::json parse_json_object(const std::string& text, const std::string& where) {
  return parse_object<nlohmann::json>(text, where);
}
nlohmann::ordered_json parse_ordered_json_object(const std::string& text, const std::string& where) {
  return parse_object<nlohmann::ordered_json>(text, where);
}

nlohmann::json read_json_object_file(const std::string& path) { return parse_json_object(read_file(path), path); }
nlohmann::ordered_json read_ordered_json_object_file(const std::string& path) {
  return parse_ordered_json_object(read_file(path), path);
}

}  // namespace lathe
