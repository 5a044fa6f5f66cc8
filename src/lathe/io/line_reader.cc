#include "lathe/io/line_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe {

namespace {
constexpr size_t kBufferBytes = size_t{1} << 20;
}  // namespace

LineReader LineReader::open(const std::string& path) {
  const RegularFile f = open_regular_file(path);
  LineReader r;
  r.path_ = path;
  r.fd_ = f.fd;
  r.size_ = f.size;
  r.buf_.resize(kBufferBytes);
  return r;
}

LineReader::LineReader(LineReader&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      size_(o.size_),
      buf_(std::move(o.buf_)),
      begin_(o.begin_),
      end_(o.end_),
      eof_(o.eof_) {}

LineReader& LineReader::operator=(LineReader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    buf_ = std::move(o.buf_);
    begin_ = o.begin_;
    end_ = o.end_;
    eof_ = o.eof_;
  }
  return *this;
}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool LineReader::fill() {
  if (eof_ || fd_ < 0) return false;
  if (begin_ > 0) {  // keep the unread tail at the front
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  for (;;) {
    const ssize_t n = ::read(fd_, buf_.data() + end_, buf_.size() - end_);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(str_cat(path_, ": read failed: ", std::strerror(errno)));
    if (n == 0) {
      eof_ = true;
      return false;
    }
    end_ += static_cast<size_t>(n);
    return true;
  }
}

bool LineReader::next(std::string& line) {
  size_t scanned = begin_;  // bytes before this were searched for '\n' already
  for (;;) {
    const void* nl = std::memchr(buf_.data() + scanned, '\n', end_ - scanned);
    if (nl) {
      const size_t at = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data());
      line.assign(buf_.data() + begin_, at - begin_);
      begin_ = at + 1;
      return true;
    }
    const size_t searched = end_ - begin_;
    if (!fill()) break;
    scanned = begin_ + searched;
  }
  if (begin_ == end_) return false;
  line.assign(buf_.data() + begin_, end_ - begin_);  // a last line without '\n'
  begin_ = end_;
  return true;
}

}  // namespace lathe
