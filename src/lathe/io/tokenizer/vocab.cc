// Vocab: arena-backed token table with linear probing over inline slots.
#include "lathe/io/tokenizer/vocab.h"

#include <cstring>

namespace lathe::tokenizer {

void Vocab::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > table_.size()) {
    std::vector<Slot> old;
    old.swap(table_);
    table_.assign(cap, Slot{kNone, 0, 0, 0});
    size_t mask = cap - 1;
    for (const Slot& s : old) {
      if (s.tag == kNone) continue;
      size_t h = hash_bytes(str_of(s)) & mask;
      while (table_[h].tag != kNone) h = (h + 1) & mask;
      table_[h] = s;
    }
  }
  arena_.reserve(n * 8);
}

void Vocab::add(std::string_view token, uint32_t id) {
  if ((used_ + 1) * 2 > table_.size()) reserve(used_ * 2 + 16);
  if (id >= id_off_.size()) {
    id_off_.resize(size_t(id) + 1, kNone);
    id_len_.resize(size_t(id) + 1, 0);
  }
  uint64_t hash = hash_bytes(token);
  uint32_t tag = tag_of(hash);
  size_t mask = table_.size() - 1;
  size_t h = hash & mask;
  while (table_[h].tag != kNone) {
    Slot& e = table_[h];
    if (e.tag == tag && e.len == token.size() && str_of(e) == token) {  // same string again: later id wins
      e.id = id;
      if (id_off_[id] == kNone) ++count_;
      id_off_[id] = e.off;
      id_len_[id] = e.len;
      return;
    }
    h = (h + 1) & mask;
  }
  Slot e{tag, uint32_t(arena_.size()), uint32_t(token.size()), id};
  arena_.append(token);
  if (id_off_[id] == kNone) ++count_;
  id_off_[id] = e.off;
  id_len_[id] = e.len;
  table_[h] = e;
  ++used_;
}

int64_t Vocab::find(std::string_view token, uint64_t hash) const {
  if (table_.empty()) return -1;
  uint32_t tag = tag_of(hash);
  size_t mask = table_.size() - 1;
  for (size_t h = hash & mask;; h = (h + 1) & mask) {
    const Slot& e = table_[h];
    if (e.tag == kNone) return -1;
    if (e.tag == tag && e.len == token.size() && std::memcmp(arena_.data() + e.off, token.data(), e.len) == 0) {
      return e.id;
    }
  }
}

std::string_view Vocab::token(uint32_t id, bool* found) const {
  bool ok = has_id(id);
  if (found) *found = ok;
  return ok ? std::string_view(arena_.data() + id_off_[id], id_len_[id]) : std::string_view();
}

}  // namespace lathe::tokenizer
