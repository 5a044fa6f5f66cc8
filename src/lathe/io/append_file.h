// Checked appends to a log file (a run's metrics.jsonl): every write's result is checked, so a full disk
// or a lost device stops the writer with the path and the errno text instead of dropping lines silently.
#pragma once

#include <string>
#include <string_view>

namespace lathe {

class AppendFile {
 public:
  // Opens (creating it when absent) `path` for appending. Throws IoError naming the path.
  static AppendFile open(const std::string& path);
  AppendFile() = default;
  AppendFile(AppendFile&& o) noexcept;
  AppendFile& operator=(AppendFile&& o) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Appends all of `bytes` (one write(2) per call unless the kernel writes less; retried to the end).
  // Throws IoError "<path>: write failed: <strerror>".
  void append(std::string_view bytes);
  // fdatasync: the lines written so far survive a crash. A file that cannot be synced (a device such as
  // /dev/null) is not an error. Throws IoError on a real failure (EIO, ENOSPC).
  void sync();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace lathe
