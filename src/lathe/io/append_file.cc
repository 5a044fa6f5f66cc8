#include "lathe/io/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/file_read.h"

namespace lathe {

AppendFile AppendFile::open(const std::string& path) {
  AppendFile f;
  // O_NONBLOCK: a FIFO in the file's place fails the open at once (ENXIO with no reader) instead of waiting
  // for one; it is refused either way, as is a socket. Devices stay allowed (/dev/null, /dev/full).
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
  if (f.fd_ < 0) {
    const int err = errno;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISDIR(st.st_mode)))
      throw IoError(not_regular_file_message(path, st.st_mode));
    throw IoError(str_cat(path, ": cannot open for writing: ", std::strerror(err)));
  }
  f.path_ = path;
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) throw IoError(str_cat(path, ": cannot stat: ", std::strerror(errno)));
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) throw IoError(not_regular_file_message(path, st.st_mode));
  // Back to blocking writes (a device could otherwise answer EAGAIN).
  const int flags = ::fcntl(f.fd_, F_GETFL);
  if (flags < 0 || ::fcntl(f.fd_, F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw IoError(str_cat(path, ": cannot set blocking mode: ", std::strerror(errno)));
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
  write_all(fd_, bytes.data(), bytes.size(), path_);
}

void AppendFile::sync() {
  LATHE_CHECK_ARG(fd_ >= 0, "[AppendFile::sync] the file is not open");
  if (::fdatasync(fd_) == 0) return;
  if (errno == EINVAL || errno == EROFS) return;  // a special file that does not support syncing
  throw IoError(str_cat(path_, ": fsync failed: ", std::strerror(errno)));
}

}  // namespace lathe
