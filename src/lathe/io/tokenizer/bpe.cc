// BPE model: loading (vocab, merges by rank), initial symbols (byte-level, chars, byte fallback, unk),
// the rank-ordered merge loop and the per-word cache. Mirrors tokenizers/src/models/bpe/{model,word}.rs
// so that ids and offsets match the Rust library exactly.
#include "lathe/io/tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

namespace {
constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr size_t kCacheMaxWord = 256;                    // as the Rust library: longer words uncached
constexpr size_t kCacheMaxSlots = size_t(1) << 20;
constexpr size_t kChunkMinWord = 64;

inline uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}
}  // namespace

// ---- MergeMap ----

void Bpe::MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots.assign(cap, Slot{0, MergeValue{0, 0}});
}

void Bpe::MergeMap::prefetch(uint32_t a, uint32_t b) const {
  uint64_t key = ((uint64_t(a) << 32) | b) + 1;
  __builtin_prefetch(&slots[mix64(key) & (slots.size() - 1)], 1);
}

void Bpe::MergeMap::insert(uint32_t a, uint32_t b, MergeValue v) {
  uint64_t key = ((uint64_t(a) << 32) | b) + 1;
  size_t mask = slots.size() - 1;
  size_t h = mix64(key) & mask;
  while (slots[h].key != 0 && slots[h].key != key) h = (h + 1) & mask;
  slots[h] = {key, v};  // a repeated pair keeps the later rank, as collecting into a HashMap does
}

const Bpe::MergeValue* Bpe::MergeMap::find(uint32_t a, uint32_t b) const {
  uint64_t key = ((uint64_t(a) << 32) | b) + 1;
  size_t mask = slots.size() - 1;
  size_t h = mix64(key) & mask;
  while (true) {
    const Slot& s = slots[h];
    if (s.key == key) return &s.value;
    if (s.key == 0) return nullptr;
    h = (h + 1) & mask;
  }
}

// ---- WordCache ----

bool Bpe::WordCache::find(std::string_view word, uint64_t h, std::vector<ModelToken>& out) const {
  if (slots.empty()) return false;
  size_t mask = slots.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots[i];
    if (s.key_len == 0) return false;
    if (s.hash == h && s.key_len == word.size() && std::memcmp(keys.data() + s.key_off, word.data(), word.size()) == 0) {
      for (uint32_t k = 0; k < s.val_len; k += 3) {
        out.push_back({values[s.val_off + k], values[s.val_off + k + 1], values[s.val_off + k + 2]});
      }
      return true;
    }
  }
}

void Bpe::WordCache::insert(std::string_view word, uint64_t h, const ModelToken* toks, size_t n) {
  if (word.empty()) return;
  if ((used + 1) * 2 > slots.size()) {
    if (slots.size() >= kCacheMaxSlots) {
      // Full: start over rather than grow without bound (long runs over diverse text).
      keys.clear();
      values.clear();
      std::fill(slots.begin(), slots.end(), Slot{});
      used = 0;
    } else {
      std::vector<Slot> old;
      old.swap(slots);
      slots.assign(old.empty() ? 4096 : old.size() * 2, Slot{});
      size_t mask = slots.size() - 1;
      for (const Slot& s : old) {
        if (s.key_len == 0) continue;
        size_t i = s.hash & mask;
        while (slots[i].key_len != 0) i = (i + 1) & mask;
        slots[i] = s;
      }
    }
  }
  size_t mask = slots.size() - 1;
  size_t i = h & mask;
  while (slots[i].key_len != 0) i = (i + 1) & mask;
  Slot s{h, uint32_t(keys.size()), uint32_t(word.size()), uint32_t(values.size()), uint32_t(n * 3)};
  keys.append(word);
  for (size_t k = 0; k < n; ++k) {
    values.push_back(toks[k].id);
    values.push_back(toks[k].start);
    values.push_back(toks[k].end);
  }
  slots[i] = s;
  ++used;
}

// ---- Bpe ----

Bpe::Bpe(Bpe&& o) noexcept { *this = std::move(o); }

Bpe& Bpe::operator=(Bpe&& o) noexcept {
  vocab_ = std::move(o.vocab_);
  merges_ = std::move(o.merges_);
  rank_new_id_ = std::move(o.rank_new_id_);
  unk_id_ = o.unk_id_;
  continuing_subword_prefix_ = std::move(o.continuing_subword_prefix_);
  end_of_word_suffix_ = std::move(o.end_of_word_suffix_);
  fuse_unk_ = o.fuse_unk_;
  byte_fallback_ = o.byte_fallback_;
  ignore_merges_ = o.ignore_merges_;
  std::memcpy(byte_ids_, o.byte_ids_, sizeof(byte_ids_));
  std::memcpy(ascii_ids_, o.ascii_ids_, sizeof(ascii_ids_));
  std::memcpy(byte_fallback_ids_, o.byte_fallback_ids_, sizeof(byte_fallback_ids_));
  raw_vocab_ = std::move(o.raw_vocab_);
  chunk_on_metaspace_ = o.chunk_on_metaspace_;
  joins_before_metaspace_ = std::move(o.joins_before_metaspace_);
  cache_ = std::move(o.cache_);
  return *this;
}

Bpe Bpe::from_json(JsonRef model, bool byte_level) {
  std::string_view type = model["type"].is_string() ? model["type"].str() : "BPE";
  if (type != "BPE") {
    throw NotImplemented(str_cat("unsupported model type '", type, "': only BPE tokenizers are supported"));
  }
  if (model["dropout"].is_number() && model["dropout"].num() > 0) {
    throw NotImplemented("BPE dropout is not supported (inference tokenizers have none)");
  }
  Bpe bpe;
  JsonRef vocab = model["vocab"];
  if (!vocab.is_object()) throw FormatError("model.vocab must be an object");
  bpe.vocab_.reserve(vocab.size());
  vocab.for_each_member([&](std::string_view tok, JsonRef id) {
    int64_t v = id.integer("vocab id");
    if (v < 0 || v > int64_t(UINT32_MAX / 2)) throw FormatError(str_cat("bad vocab id ", v));
    bpe.vocab_.add(tok, uint32_t(v));
  });
  if (model["continuing_subword_prefix"].is_string()) bpe.continuing_subword_prefix_ = model["continuing_subword_prefix"].str();
  if (model["end_of_word_suffix"].is_string()) bpe.end_of_word_suffix_ = model["end_of_word_suffix"].str();
  bpe.fuse_unk_ = model["fuse_unk"].is_bool() && model["fuse_unk"].boolean();
  bpe.byte_fallback_ = model["byte_fallback"].is_bool() && model["byte_fallback"].boolean();
  bpe.ignore_merges_ = model["ignore_merges"].is_bool() && model["ignore_merges"].boolean();
  if (model["unk_token"].is_string()) {
    std::string_view unk = model["unk_token"].str();
    int64_t id = bpe.vocab_.find(unk);
    // The Rust library fails only when an unknown char actually needs it; keep loading likewise.
    if (id >= 0) bpe.unk_id_ = uint32_t(id);
  }

  bpe.load_merges(model["merges"]);
  bpe.prepare_tables(byte_level);
  return bpe;
}

void Bpe::load_merges(JsonRef merges) {
  // Gemma 3 has 515k merges, each needing three vocab lookups (a, b, a+b) and one insert: done in
  // batches whose hash-table slots are prefetched first, since nearly every lookup misses the cache.
  struct Pending {
    std::string_view a, b;
    uint32_t ab_off, ab_len;  // a+b inside `joined`
    uint64_t ha, hb, hab;
    int64_t ia, ib, iab;
  };
  constexpr size_t kBatch = 32;
  std::vector<Pending> batch;
  batch.reserve(kBatch);
  std::string joined;
  size_t prefix_len = continuing_subword_prefix_.size();
  merges_.reserve(merges.size());
  rank_new_id_.reserve(merges.size());
  uint32_t rank = 0;
  auto flush = [&]() {
    for (Pending& p : batch) {
      std::string_view ab(joined.data() + p.ab_off, p.ab_len);
      p.ha = hash_bytes(p.a);
      p.hb = hash_bytes(p.b);
      p.hab = hash_bytes(ab);
      vocab_.prefetch(p.ha);
      vocab_.prefetch(p.hb);
      vocab_.prefetch(p.hab);
    }
    for (Pending& p : batch) {
      p.ia = vocab_.find(p.a, p.ha);
      p.ib = vocab_.find(p.b, p.hb);
      p.iab = vocab_.find(std::string_view(joined.data() + p.ab_off, p.ab_len), p.hab);
      if (p.ia >= 0 && p.ib >= 0) merges_.prefetch(uint32_t(p.ia), uint32_t(p.ib));
    }
    for (const Pending& p : batch) {
      if (p.ia < 0) throw FormatError(str_cat("merge token '", p.a, "' is not in the vocab"));
      if (p.ib < 0) throw FormatError(str_cat("merge token '", p.b, "' is not in the vocab"));
      if (p.iab < 0) {
        throw FormatError(str_cat("merged token '", std::string_view(joined.data() + p.ab_off, p.ab_len),
                                  "' is not in the vocab"));
      }
      merges_.insert(uint32_t(p.ia), uint32_t(p.ib), MergeValue{rank, uint32_t(p.iab)});
      rank_new_id_.push_back(uint32_t(p.iab));
      ++rank;
    }
    batch.clear();
    joined.clear();
  };
  auto add = [&](std::string_view a, std::string_view b) {
    Pending p{};
    p.a = a;
    p.b = b;
    p.ab_off = uint32_t(joined.size());
    joined.append(a);
    joined.append(b.substr(std::min(prefix_len, b.size())));
    p.ab_len = uint32_t(joined.size() - p.ab_off);
    batch.push_back(p);
    if (batch.size() == kBatch) flush();
  };
  merges.for_each_element([&](JsonRef m) {
    if (m.is_string()) {
      std::string_view line = m.str();
      size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos) {
        throw FormatError(str_cat("bad merge #", rank + batch.size() + 1, ": '", line, "'"));
      }
      add(line.substr(0, sp), line.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2) {
      std::string_view parts[2];
      int k = 0;
      m.for_each_element([&](JsonRef p) { parts[k++] = p.str("merge part"); });
      add(parts[0], parts[1]);
    } else {
      throw FormatError(str_cat("bad merge #", rank + batch.size() + 1));
    }
  });
  flush();
}

void Bpe::prepare_tables(bool byte_level) {
  const auto& bl = ByteLevelTable::get();
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = int32_t(vocab_.find(bl.byte_to_utf8[b]));
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_fallback_ids_[b] = byte_fallback_ ? int32_t(vocab_.find(name)) : -1;
  }
  for (int c = 0; c < 128; ++c) {
    char s[1] = {char(c)};
    ascii_ids_[c] = int32_t(vocab_.find(std::string_view(s, 1)));
  }
  if (byte_level && ignore_merges_) {
    // ignore_merges looks the whole word up; byte-level words are raw bytes here.
    raw_vocab_.reserve(vocab_.size());
    std::string raw;
    for (uint32_t id = 0; id < vocab_.max_id_plus_one(); ++id) {
      if (!vocab_.has_id(id)) continue;
      std::string_view tok = vocab_.token(id);
      raw.clear();
      bool ok = true;
      for (size_t i = 0; i < tok.size() && ok;) {
        char32_t c = utf8_next(tok, i);
        ok = c < bl.char_to_byte.size() && bl.char_to_byte[c] >= 0;
        if (ok) raw.push_back(char(bl.char_to_byte[c]));
      }
      if (ok) raw_vocab_.add(raw, id);
    }
  }
  chunk_on_metaspace_ = !byte_level && vocab_.find(kMetaspace) >= 0 && continuing_subword_prefix_.empty() &&
                        end_of_word_suffix_.empty();
  if (chunk_on_metaspace_) {
    for (uint32_t id = 0; id < vocab_.max_id_plus_one(); ++id) {
      std::string_view tok = vocab_.token(id);
      for (size_t p = tok.find(kMetaspace, 1); p != std::string_view::npos; p = tok.find(kMetaspace, p + 1)) {
        size_t cs = p - 1;
        while (cs > 0 && is_utf8_continuation(uint8_t(tok[cs]))) --cs;
        size_t i = cs;
        char32_t c = utf8_next(tok, i);
        if (c != 0x2581) joins_before_metaspace_.push_back(c);
      }
    }
    std::sort(joins_before_metaspace_.begin(), joins_before_metaspace_.end());
    joins_before_metaspace_.erase(std::unique(joins_before_metaspace_.begin(), joins_before_metaspace_.end()),
                                  joins_before_metaspace_.end());
  }
}

void Bpe::add_initial_symbols(std::string_view w, bool byte_level, BpeScratch& s) const {
  s.symbols.clear();
  auto push = [&](uint32_t id, uint32_t len) {
    int32_t n = int32_t(s.symbols.size());
    if (n > 0) s.symbols.back().next = n;
    s.symbols.push_back({id, n - 1, -1, 0, len});
  };
  // A pending unknown (Rust's `unk`), fused with following unknowns when fuse_unk.
  bool unk_pending = false;
  uint32_t unk_len = 0;
  bool plain = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
  std::string piece;
  size_t i = 0;
  while (i < w.size()) {
    size_t start = i;
    int64_t id;
    if (byte_level) {
      id = byte_ids_[uint8_t(w[i])];
      i += 1;
    } else if (plain && uint8_t(w[i]) < 0x80) {
      id = ascii_ids_[uint8_t(w[i])];
      i += 1;
    } else {
      i += size_t(utf8_len(uint8_t(w[i])));
      if (i > w.size()) i = w.size();
      std::string_view ch = w.substr(start, i - start);
      if (plain) {
        id = vocab_.find(ch);
      } else {
        piece.clear();
        if (start != 0) piece += continuing_subword_prefix_;
        piece += ch;
        if (i == w.size()) piece += end_of_word_suffix_;
        id = vocab_.find(piece);
      }
    }
    uint32_t len = uint32_t(i - start);
    if (id >= 0) {
      if (unk_pending) push(*unk_id_, unk_len);
      unk_pending = false;
      push(uint32_t(id), len);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (size_t k = start; k < i; ++k) all &= byte_fallback_ids_[uint8_t(w[k])] >= 0;
      if (all) {
        // As the Rust library: byte tokens go in without flushing a pending unknown.
        for (size_t k = start; k < i; ++k) push(uint32_t(byte_fallback_ids_[uint8_t(w[k])]), 1);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unk token: the char is dropped
    if (unk_pending && fuse_unk_) {
      unk_len += len;
    } else {
      if (unk_pending) push(*unk_id_, unk_len);
      unk_pending = true;
      unk_len = len;
    }
  }
  if (unk_pending) push(*unk_id_, unk_len);
}

void Bpe::merge_all(BpeScratch& s) const {
  auto& sym = s.symbols;
  auto& heap = s.heap;
  heap.clear();
  // Min-heap on (rank, position): lowest rank first, leftmost on ties.
  auto push = [&](uint32_t rank, uint32_t pos) {
    heap.push_back((uint64_t(rank) << 32) | pos);
    std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k) {
    if (const MergeValue* m = merges_.find(sym[k].id, sym[k + 1].id)) heap.push_back((uint64_t(m->rank) << 32) | k);
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    uint64_t top = heap.back();
    heap.pop_back();
    uint32_t rank = uint32_t(top >> 32), pos = uint32_t(top);
    auto& cur = sym[pos];
    if (cur.len == 0 || cur.next < 0) continue;
    int32_t next_pos = cur.next;
    auto right = sym[size_t(next_pos)];
    // Stale entry: the pair at pos changed since it was queued (same test as the Rust code).
    const MergeValue* m = merges_.find(cur.id, right.id);
    if (!m || m->new_id != rank_new_id_[rank]) continue;
    cur.id = rank_new_id_[rank];
    cur.len += right.len;
    cur.next = right.next;
    sym[size_t(next_pos)].len = 0;
    if (right.next >= 0 && size_t(right.next) < sym.size()) sym[size_t(right.next)].prev = int32_t(pos);
    if (cur.prev >= 0) {
      if (const MergeValue* pm = merges_.find(sym[size_t(cur.prev)].id, cur.id)) push(pm->rank, uint32_t(cur.prev));
    }
    if (cur.next >= 0 && size_t(cur.next) < sym.size()) {
      if (const MergeValue* nm = merges_.find(cur.id, sym[size_t(cur.next)].id)) push(nm->rank, pos);
    }
  }
}

void Bpe::tokenize_chunk(std::string_view chunk, uint32_t base, bool byte_level, std::vector<ModelToken>& out,
                         BpeScratch& scratch, bool use_cache) const {
  bool cacheable = use_cache && chunk.size() < kCacheMaxWord;
  uint64_t h = 0;
  if (cacheable) {
    h = hash_bytes(chunk) | 1;  // odd: distinguishes byte-level entries below
    if (byte_level) h ^= 0x8000000000000000ull;
    size_t first = out.size();
    if (cache_.find(chunk, h, out)) {
      for (size_t k = first; k < out.size(); ++k) {
        out[k].start += base;
        out[k].end += base;
      }
      return;
    }
  }
  add_initial_symbols(chunk, byte_level, scratch);
  if (scratch.symbols.size() > 1) merge_all(scratch);
  // Offsets are cumulative symbol lengths, as Word::get_offsets computes them.
  auto& toks = scratch.word_tokens;
  toks.clear();
  uint32_t pos = 0;
  for (const auto& sym : scratch.symbols) {
    if (sym.len == 0) continue;
    toks.push_back({sym.id, pos, pos + sym.len});
    pos += sym.len;
  }
  if (cacheable) cache_.insert(chunk, h, toks.data(), toks.size());
  for (const auto& t : toks) out.push_back({t.id, t.start + base, t.end + base});
}

void Bpe::tokenize(std::string_view word, bool byte_level, std::vector<ModelToken>& out, BpeScratch& scratch,
                   bool use_cache) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int64_t id = byte_level ? raw_vocab_.find(word) : vocab_.find(word);
    if (id >= 0) {
      out.push_back({uint32_t(id), 0, uint32_t(word.size())});
      return;
    }
  }
  if (byte_level || !chunk_on_metaspace_ || word.size() < kChunkMinWord) {
    tokenize_chunk(word, 0, byte_level, out, scratch, use_cache);
    return;
  }
  size_t chunk_start = 0;
  for (size_t p = word.find(kMetaspace, 1); p != std::string_view::npos; p = word.find(kMetaspace, p + 1)) {
    size_t cs = p - 1;
    while (cs > 0 && is_utf8_continuation(uint8_t(word[cs]))) --cs;
    size_t i = cs;
    char32_t c = utf8_next(word, i);
    if (c == 0x2581 || std::binary_search(joins_before_metaspace_.begin(), joins_before_metaspace_.end(), c)) continue;
    if (p > chunk_start) {
      tokenize_chunk(word.substr(chunk_start, p - chunk_start), uint32_t(chunk_start), false, out, scratch, use_cache);
    }
    chunk_start = p;
  }
  tokenize_chunk(word.substr(chunk_start), uint32_t(chunk_start), false, out, scratch, use_cache);
}

}  // namespace lathe::tokenizer
