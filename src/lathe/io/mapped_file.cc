#include "lathe/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe {

MappedFile MappedFile::open(const std::string& path) {
  const RegularFile rf = open_regular_file(path);
  const int fd = rf.fd;
  MappedFile f;
  f.path = path;
  f.size = rf.size;
  if (f.size == 0) {
    ::close(fd);
    return f;
  }
  void* p = ::mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw IoError(str_cat(path, ": mmap failed: ", std::strerror(errno)));
  f.data = static_cast<const char*>(p);
  const size_t size = f.size;
  f.owner = std::shared_ptr<void>(p, [size](void* q) { ::munmap(q, size); });
  return f;
}

void write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(str_cat(path, ": write failed: ", std::strerror(errno)));
    }
    if (w == 0) throw IoError(str_cat(path, ": write failed: no bytes written"));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void write_file_atomic(const std::string& path,
                       const std::function<void(const std::function<void(const void*, size_t)>&)>& write) {
  const std::string tmp = str_cat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(str_cat(tmp, ": cannot create: ", std::strerror(errno)));
  try {
    write([&](const void* d, size_t n) { write_all(fd, d, n, tmp); });
    if (::fsync(fd) != 0) throw IoError(str_cat(tmp, ": fsync failed: ", std::strerror(errno)));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw IoError(str_cat(tmp, ": close failed: ", std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw IoError(str_cat(path, ": rename failed: ", std::strerror(errno)));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  try {
    fsync_path(dir.string());
  } catch (const IoError&) {
    // The file itself is durable; a folder that cannot be synced (some filesystems) is not an error here.
  }
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError(str_cat(path, ": cannot open to fsync: ", std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw IoError(str_cat(path, ": fsync failed: ", std::strerror(errno)));
}

void write_file_atomic(const std::string& path, const std::string& content) {
  write_file_atomic(path, [&](const std::function<void(const void*, size_t)>& append) {
    append(content.data(), content.size());
  });
}

}  // namespace lathe
