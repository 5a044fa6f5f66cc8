// Reading a text file line by line, streamed (data prepare inputs can be many GB; metrics.jsonl grows with
// the run). The file is opened with open_regular_file: a FIFO, folder, socket or device is refused with an
// IoError naming the path, without blocking.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lathe {

class LineReader {
 public:
  // IoError "<path>: is a FIFO (named pipe), not a regular file" (or folder, ...), or "<path>: cannot open".
  static LineReader open(const std::string& path);
  LineReader(LineReader&& o) noexcept;
  LineReader& operator=(LineReader&& o) noexcept;
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  ~LineReader();

  // The next line without its '\n' (as std::getline: a last line without '\n' counts, an empty file has
  // no lines); false at the end of the file. IoError "<path>: read failed: ..." on a read error.
  bool next(std::string& line);

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }  // the file's size in bytes when it was opened

 private:
  LineReader() = default;
  bool fill();  // reads more into buf_; false at the end of the file

  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes: buf_[begin_, end_)
  bool eof_ = false;
};

}  // namespace lathe
