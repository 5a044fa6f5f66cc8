// Token shards in llm.c's format (specs/pretrain.md §2.7), the on-disk form of a pre-training corpus:
//   header: 256 x int32 little-endian: [0] magic, [1] version, [2] number of tokens, [3..255] 0
//     magic 20240520 + version 1: uint16 tokens (GPT-2-sized vocabularies, <= 65536 ids)
//     magic 20240801 + version 7: uint32 tokens (Llama-3-sized vocabularies)
//   body: the tokens, little-endian; the file is exactly 1024 + n * width bytes.
// Shards are memory-mapped read-only; every malformed file fails with a FormatError naming the file and the
// byte offset where it stops making sense.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "lathe/io/mapped_file.h"

namespace lathe::train {

inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

// Bytes per token: 2 when every id fits in uint16, else 4.
int token_width_for_vocab(uint64_t vocab_size);

class TokenShard {
 public:
  // Maps and validates `path` (magic, version, size). Throws IoError / FormatError.
  static TokenShard open(const std::string& path);

  const std::string& path() const { return file_.path; }
  int64_t size() const { return n_tokens_; }  // number of tokens
  int width() const { return width_; }        // bytes per token: 2 or 4
  uint32_t operator[](int64_t i) const;
  // Copies tokens [begin, begin + count) widened to int32 into out. Checks the range; ids must be below
  // vocab_limit (when > 0), else FormatError naming the file and the token's byte offset.
  void read(int64_t begin, int64_t count, int32_t* out, uint64_t vocab_limit = 0) const;

 private:
  MappedFile file_;
  const unsigned char* body_ = nullptr;
  int64_t n_tokens_ = 0;
  int width_ = 2;
};

// Writes a shard crash-safely (temporary name, fsync, rename). width is 2 or 4; every token must fit.
void write_token_shard(const std::string& path, std::span<const uint32_t> tokens, int width);

}  // namespace lathe::train
