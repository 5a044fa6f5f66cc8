#include "lathe/io/checksum.h"

#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe {

namespace {

std::string hex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : c.digest) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace

FileDigest digest_bytes(const void* data, size_t size) {
  return {.size = size, .xxh3_128 = hex(XXH3_128bits(data, size))};
}

FileDigest digest_file(const std::string& path) {
  const int fd = open_regular_file(path).fd;  // refuses a FIFO, folder or device, naming what it is
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), &XXH3_freeState);
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) throw IoError(str_cat(path, ": cannot start the checksum"));
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IoError(str_cat(path, ": read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    XXH3_128bits_update(state.get(), buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  return {.size = total, .xxh3_128 = hex(XXH3_128bits_digest(state.get()))};
}

}  // namespace lathe
