#include "lathe/train/token_shard.h"

#include <cstring>
#include <vector>

#include "lathe/base/error.h"

namespace lathe::train {

int token_width_for_vocab(uint64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenShard TokenShard::open(const std::string& path) {
  TokenShard shard;
  shard.file_ = MappedFile::open(path);
  const size_t size = shard.file_.size;
  LATHE_CHECK_FORMAT(size >= kShardHeaderBytes, path, ": truncated token shard: the file ends at offset ", size,
                     " inside the ", kShardHeaderBytes, "-byte header");
  int32_t header[3];
  std::memcpy(header, shard.file_.data, sizeof(header));
  if (header[0] == kShardMagicU16) {
    LATHE_CHECK_FORMAT(header[1] == kShardVersionU16, path, ": unsupported token shard version ", header[1],
                       " at offset 4 (uint16 shards are version ", kShardVersionU16, ")");
    shard.width_ = 2;
  } else if (header[0] == kShardMagicU32) {
    LATHE_CHECK_FORMAT(header[1] == kShardVersionU32, path, ": unsupported token shard version ", header[1],
                       " at offset 4 (uint32 shards are version ", kShardVersionU32, ")");
    shard.width_ = 4;
  } else {
    throw FormatError(str_cat(path, ": not a token shard: magic ", header[0], " at offset 0 (expected ",
                              kShardMagicU16, " or ", kShardMagicU32, ")"));
  }
  LATHE_CHECK_FORMAT(header[2] >= 0, path, ": negative token count ", header[2], " at offset 8");
  shard.n_tokens_ = header[2];
  const size_t expected = kShardHeaderBytes + static_cast<size_t>(shard.n_tokens_) * shard.width_;
  LATHE_CHECK_FORMAT(size >= expected, path, ": truncated token shard: the header (offset 8) promises ",
                     shard.n_tokens_, " tokens (", expected, " bytes) but the file ends at offset ", size);
  LATHE_CHECK_FORMAT(size == expected, path, ": ", size - expected, " unexpected bytes after the last token, from offset ",
                     expected);
  shard.body_ = reinterpret_cast<const unsigned char*>(shard.file_.data) + kShardHeaderBytes;
  return shard;
}

uint32_t TokenShard::operator[](int64_t i) const {
  LATHE_ASSERT(i >= 0 && i < n_tokens_);
  if (width_ == 2) {
    uint16_t v;
    std::memcpy(&v, body_ + i * 2, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, body_ + i * 4, 4);
  return v;
}

void TokenShard::read(int64_t begin, int64_t count, int32_t* out, uint64_t vocab_limit) const {
  LATHE_CHECK_ARG(begin >= 0 && count >= 0 && begin + count <= n_tokens_, path(), ": read of tokens [", begin, ", ",
                  begin + count, ") outside the shard's ", n_tokens_, " tokens");
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t id = (*this)[begin + i];
    if (vocab_limit > 0 && id >= vocab_limit)
      throw FormatError(str_cat(path(), ": token id ", id, " at offset ",
                                kShardHeaderBytes + static_cast<size_t>(begin + i) * width_,
                                " is outside the vocabulary (", vocab_limit, " ids): corrupt shard or wrong tokenizer"));
    out[i] = static_cast<int32_t>(id);
  }
}

void write_token_shard(const std::string& path, std::span<const uint32_t> tokens, int width) {
  LATHE_CHECK_ARG(width == 2 || width == 4, "token shard width must be 2 or 4 bytes, got ", width);
  LATHE_CHECK_ARG(tokens.size() <= static_cast<size_t>(INT32_MAX), path, ": ", tokens.size(),
                  " tokens do not fit one shard (at most 2^31-1)");
  int32_t header[kShardHeaderInts] = {};
  header[0] = width == 2 ? kShardMagicU16 : kShardMagicU32;
  header[1] = width == 2 ? kShardVersionU16 : kShardVersionU32;
  header[2] = static_cast<int32_t>(tokens.size());
  write_file_atomic(path, [&](const std::function<void(const void*, size_t)>& append) {
    append(header, sizeof(header));
    if (width == 4) {
      append(tokens.data(), tokens.size() * 4);
      return;
    }
    // Narrow to uint16 in blocks so a 100M-token shard needs no second full-size buffer.
    std::vector<uint16_t> block;
    constexpr size_t kBlock = 1 << 16;
    for (size_t i = 0; i < tokens.size(); i += kBlock) {
      const size_t n = std::min(kBlock, tokens.size() - i);
      block.resize(n);
      for (size_t j = 0; j < n; ++j) {
        LATHE_CHECK_ARG(tokens[i + j] <= 0xFFFF, path, ": token id ", tokens[i + j], " does not fit a uint16 shard");
        block[j] = static_cast<uint16_t>(tokens[i + j]);
      }
      append(block.data(), n * 2);
    }
  });
}

}  // namespace lathe::train
