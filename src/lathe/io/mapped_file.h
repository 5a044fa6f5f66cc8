// Read-only memory map of a whole file; the mapping lives as long as any Storage that points into it.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace lathe {

struct MappedFile {
  std::string path;
  const char* data = nullptr;
  size_t size = 0;
  std::shared_ptr<void> owner;  // unmaps on release
  // Throws IoError naming the path (also for a FIFO, folder or device: open_regular_file).
  static MappedFile open(const std::string& path);
};

// fsync of a file or a folder (a folder: makes renames and new entries inside it durable). Throws IoError.
void fsync_path(const std::string& path);

// Writes all `n` bytes to fd (retrying short writes and EINTR); IoError "<path>: write failed: <strerror>".
void write_all(int fd, const void* data, size_t n, const std::string& path);

// Writes a file crash-safely: content goes to "<path>.tmp.<pid>", is fsynced, then renamed over path, and
// the directory is fsynced. A crash leaves either the old file or the new one, never a torn file.
void write_file_atomic(const std::string& path, const std::string& content);
// Streaming form for large files: `write` receives a function that appends bytes.
void write_file_atomic(const std::string& path,
                       const std::function<void(const std::function<void(const void*, size_t)>& append)>& write);

}  // namespace lathe
