#include "lathe/io/append_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "lathe/base/error.h"

namespace lathe {

AppendFile AppendFile::open(const std::string& path) {
  AppendFile f;
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (f.fd_ < 0) throw IoError(str_cat(path, ": cannot open for writing: ", std::strerror(errno)));
  f.path_ = path;
  return f;
}

AppendFile::AppendFile(AppendFile&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}

AppendFile& AppendFile::operator=(AppendFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view bytes) {
  LATHE_CHECK_ARG(fd_ >= 0, "[AppendFile::append] the file is not open");
  const char* p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(str_cat(path_, ": write failed: ", std::strerror(errno)));
    }
    if (w == 0) throw IoError(str_cat(path_, ": write failed: no bytes written"));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AppendFile::sync() {
  LATHE_CHECK_ARG(fd_ >= 0, "[AppendFile::sync] the file is not open");
  if (::fdatasync(fd_) == 0) return;
  if (errno == EINVAL || errno == EROFS) return;  // a special file that does not support syncing
  throw IoError(str_cat(path_, ": fsync failed: ", std::strerror(errno)));
}

}  // namespace lathe
