// Token string <-> id tables for large vocabularies. Loading Gemma 3 (262k tokens) through a node-based
// std::unordered_map costs one allocation per token; here all strings live in one arena and lookups go
// through an open-addressing table of ids, which is also faster to probe while encoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::tokenizer {

inline uint64_t hash_bytes(std::string_view s) {
  // 64-bit FNV-1a over 8-byte words then bytes; mixed at the end. Words are short (< 32 bytes).
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ uint8_t(s[i])) * 0x100000001b3ull;
  h ^= h >> 32;
  h *= 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

class Vocab {
 public:
  // Adds token -> id (ids need not be dense; a later add of the same string wins the lookup, as a
  // JSON object with a repeated key would in serde).
  void add(std::string_view token, uint32_t id);
  // Id of token, or -1.
  int64_t find(std::string_view token) const { return find(token, hash_bytes(token)); }
  // With a precomputed hash_bytes(token); prefetch() first hides the cache miss in batched lookups.
  int64_t find(std::string_view token, uint64_t hash) const;
  void prefetch(uint64_t hash) const {
    if (!table_.empty()) __builtin_prefetch(&table_[hash & (table_.size() - 1)]);
  }
  // Token of id, or an empty view with found = false.
  std::string_view token(uint32_t id, bool* found = nullptr) const;
  bool has_id(uint32_t id) const { return id < id_off_.size() && id_off_[id] != kNone; }
  size_t size() const { return count_; }
  uint32_t max_id_plus_one() const { return uint32_t(id_off_.size()); }
  void reserve(size_t n);

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  // One slot per distinct string, inline so a probe touches the slot and (on a tag hit) the arena only.
  struct Slot {
    uint32_t tag;  // high hash bits; kNone marks an empty slot
    uint32_t off, len, id;
  };
  std::string_view str_of(const Slot& e) const { return std::string_view(arena_.data() + e.off, e.len); }
  static uint32_t tag_of(uint64_t h) { return uint32_t(h >> 32) == kNone ? 0 : uint32_t(h >> 32); }

  std::string arena_;
  std::vector<uint32_t> id_off_;   // id -> offset into arena_ (kNone when unused)
  std::vector<uint32_t> id_len_;   // id -> length
  std::vector<Slot> table_;        // open addressing, linear probing
  size_t used_ = 0;                // occupied slots
  size_t count_ = 0;               // distinct ids
};

}  // namespace lathe::tokenizer
