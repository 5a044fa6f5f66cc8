// Recursive-descent JSON parser into JsonDoc's flat node array; strings are unescaped in place
// (an unescaped string is never longer than its escaped form).
#include "lathe/io/tokenizer/json_reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

class JsonParser {
 public:
  JsonParser(JsonDoc& doc, const std::string& name) : doc_(doc), name_(name) {
    p_ = doc_.data_;
    end_ = p_ + doc_.size_;
  }

  void run() {
    doc_.nodes_.reserve(doc_.size_ / 20 + 16);
    skip_ws();
    value(0);
    skip_ws();
    if (p_ != end_) fail("trailing characters after the document");
  }

 private:
  [[noreturn]] void fail(const char* what) {
    throw FormatError(str_cat(name_, ": invalid JSON at byte ", p_ - doc_.data_, ": ", what));
  }

  void skip_ws() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  uint32_t push(JsonKind kind) {
    JsonDoc::Node n{};
    n.kind = kind;
    doc_.nodes_.push_back(n);
    return uint32_t(doc_.nodes_.size() - 1);
  }

  void value(int depth) {
    if (depth > 512) fail("nesting too deep");
    if (p_ >= end_) fail("unexpected end");
    switch (*p_) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return string_node();
      case 't': return literal("true", JsonKind::kBool, true);
      case 'f': return literal("false", JsonKind::kBool, false);
      case 'n': return literal("null", JsonKind::kNull, false);
      default: return number();
    }
  }

  void literal(const char* word, JsonKind kind, bool flag) {
    size_t n = std::strlen(word);
    if (size_t(end_ - p_) < n || std::memcmp(p_, word, n) != 0) fail("unexpected character");
    p_ += n;
    uint32_t i = push(kind);
    doc_.nodes_[i].flag = flag;
    doc_.nodes_[i].end = i + 1;
  }

  void number() {
    const char* start = p_;
    if (p_ < end_ && *p_ == '-') ++p_;
    bool digits = false;
    while (p_ < end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '.' || *p_ == 'e' || *p_ == 'E' || *p_ == '+' ||
                         *p_ == '-')) {
      digits = true;
      ++p_;
    }
    if (!digits || p_ - start > 60) fail("malformed number");
    // Validated and converted on access (most numbers of a tokenizer.json are never read as doubles).
    uint32_t i = push(JsonKind::kNumber);
    doc_.nodes_[i].offset = uint32_t(start - doc_.data_);
    doc_.nodes_[i].size = uint32_t(p_ - start);
    doc_.nodes_[i].end = i + 1;
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  uint32_t read_hex4() {
    if (end_ - p_ < 4) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      int h = hex(p_[k]);
      if (h < 0) fail("bad \\u escape");
      v = v * 16 + uint32_t(h);
    }
    p_ += 4;
    return v;
  }

  // Parses the string at p_ (at the opening quote), unescaping in place; returns [offset, length].
  std::pair<uint64_t, uint32_t> string_raw() {
    ++p_;
    char* start = p_;
    // Fast scan: most strings have no escapes.
    while (p_ < end_ && *p_ != '"' && *p_ != '\\') ++p_;
    char* out = p_;
    while (true) {
      if (p_ >= end_) fail("unterminated string");
      char c = *p_;
      if (c == '"') break;
      if (c != '\\') {
        *out++ = c;
        ++p_;
        continue;
      }
      ++p_;
      if (p_ >= end_) fail("unterminated escape");
      char e = *p_++;
      switch (e) {
        case '"': *out++ = '"'; break;
        case '\\': *out++ = '\\'; break;
        case '/': *out++ = '/'; break;
        case 'b': *out++ = '\b'; break;
        case 'f': *out++ = '\f'; break;
        case 'n': *out++ = '\n'; break;
        case 'r': *out++ = '\r'; break;
        case 't': *out++ = '\t'; break;
        case 'u': {
          uint32_t cp = read_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u') {
            const char* save = p_;
            p_ += 2;
            uint32_t lo = read_hex4();
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              p_ = const_cast<char*>(save);
              cp = 0xFFFD;
            }
          } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            cp = 0xFFFD;  // lone surrogate: as serde_json's lossy handling would not accept; keep going
          }
          std::string enc;
          utf8_append(enc, char32_t(cp));
          // The escape took >= 6 bytes, the encoding <= 4: writing in place never overtakes p_.
          std::memcpy(out, enc.data(), enc.size());
          out += enc.size();
          break;
        }
        default: fail("bad escape");
      }
    }
    uint64_t off = uint64_t(start - doc_.data_);
    uint32_t len = uint32_t(out - start);
    ++p_;  // closing quote
    return {off, len};
  }

  void string_node() {
    auto [off, len] = string_raw();
    uint32_t i = push(JsonKind::kString);
    doc_.nodes_[i].offset = uint32_t(off);
    doc_.nodes_[i].size = len;
    doc_.nodes_[i].end = i + 1;
  }

  void array(int depth) {
    uint32_t i = push(JsonKind::kArray);
    ++p_;
    skip_ws();
    uint32_t count = 0;
    if (p_ < end_ && *p_ == ']') {
      ++p_;
    } else {
      while (true) {
        skip_ws();
        value(depth + 1);
        ++count;
        skip_ws();
        if (p_ >= end_) fail("unterminated array");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == ']') {
          ++p_;
          break;
        }
        fail("expected ',' or ']'");
      }
    }
    doc_.nodes_[i].size = count;
    doc_.nodes_[i].end = uint32_t(doc_.nodes_.size());
  }

  void object(int depth) {
    uint32_t i = push(JsonKind::kObject);
    ++p_;
    skip_ws();
    uint32_t count = 0;
    if (p_ < end_ && *p_ == '}') {
      ++p_;
    } else {
      while (true) {
        skip_ws();
        if (p_ >= end_ || *p_ != '"') fail("expected a member name");
        string_node();
        skip_ws();
        if (p_ >= end_ || *p_ != ':') fail("expected ':'");
        ++p_;
        skip_ws();
        value(depth + 1);
        ++count;
        skip_ws();
        if (p_ >= end_) fail("unterminated object");
        if (*p_ == ',') {
          ++p_;
          continue;
        }
        if (*p_ == '}') {
          ++p_;
          break;
        }
        fail("expected ',' or '}'");
      }
    }
    doc_.nodes_[i].size = count;
    doc_.nodes_[i].end = uint32_t(doc_.nodes_.size());
  }

  JsonDoc& doc_;
  const std::string& name_;
  char* p_;
  char* end_;
};

JsonDoc JsonDoc::parse(std::string text, const std::string& name) {
  if (text.size() >= UINT32_MAX) throw FormatError(str_cat(name, ": larger than 4 GB"));
  JsonDoc doc;
  auto owned = std::make_shared<std::string>(std::move(text));
  doc.data_ = owned->data();
  doc.size_ = owned->size();
  doc.owner_ = owned;
  JsonParser(doc, name).run();
  return doc;
}

JsonDoc JsonDoc::parse_file(const std::string& path) {
  const RegularFile rf = open_regular_file(path);  // a FIFO, folder or device fails here, naming it
  const int fd = rf.fd;
  size_t size = rf.size;
  if (size == 0 || size >= UINT32_MAX) {
    ::close(fd);
    if (size == 0) throw FormatError(str_cat(path, ": empty file"));
    throw FormatError(str_cat(path, ": larger than 4 GB"));
  }
  // Private writable mapping: the pages come straight from the page cache (no copy) and only those
  // holding escaped strings, which are unescaped in place, get copied on write.
  void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) throw IoError(str_cat("cannot map ", path));
  JsonDoc doc;
  doc.data_ = static_cast<char*>(m);
  doc.size_ = size;
  doc.owner_ = std::shared_ptr<void>(m, [size](void* p) { ::munmap(p, size); });
  JsonParser(doc, path).run();
  return doc;
}

JsonKind JsonRef::kind() const { return doc_->node(index_).kind; }

std::string_view JsonRef::str(const char* what) const {
  if (!is_string()) throw FormatError(str_cat("expected a string for ", what));
  return doc_->string_at(doc_->node(index_));
}

double JsonRef::num(const char* what) const {
  if (!is_number()) throw FormatError(str_cat("expected a number for ", what));
  std::string_view t = doc_->string_at(doc_->node(index_));
  char tmp[64];
  std::memcpy(tmp, t.data(), t.size());
  tmp[t.size()] = 0;
  char* stop = nullptr;
  double v = std::strtod(tmp, &stop);
  if (stop != tmp + t.size()) throw FormatError(str_cat("malformed number '", t, "' for ", what));
  return v;
}

int64_t JsonRef::integer(const char* what) const {
  if (!is_number()) throw FormatError(str_cat("expected a number for ", what));
  std::string_view t = doc_->string_at(doc_->node(index_));
  // Fast path for plain integers (every vocab id).
  size_t i = t[0] == '-' ? 1 : 0;
  if (i < t.size() && t.size() - i <= 18) {
    int64_t v = 0;
    bool ok = true;
    for (size_t k = i; k < t.size() && ok; ++k) {
      ok = t[k] >= '0' && t[k] <= '9';
      v = v * 10 + (t[k] - '0');
    }
    if (ok) return i ? -v : v;
  }
  double v = num(what);
  if (v != std::floor(v)) throw FormatError(str_cat("expected an integer for ", what));
  return int64_t(v);
}

bool JsonRef::boolean(const char* what) const {
  if (!is_bool()) throw FormatError(str_cat("expected a boolean for ", what));
  return doc_->node(index_).flag;
}

JsonRef JsonRef::operator[](std::string_view key) const {
  JsonRef found;
  if (!is_object()) return found;
  const auto& n = doc_->node(index_);
  uint32_t child = index_ + 1;
  for (uint32_t k = 0; k < n.size; ++k) {
    uint32_t value = child + 1;
    if (doc_->string_at(doc_->node(child)) == key) return JsonRef(doc_, value);
    child = doc_->node(value).end;
  }
  return found;
}

uint32_t JsonRef::size() const {
  if (!is_array() && !is_object()) return 0;
  return doc_->node(index_).size;
}

}  // namespace lathe::tokenizer
