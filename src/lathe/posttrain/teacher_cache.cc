#include "lathe/posttrain/teacher_cache.h"

#include <xxhash.h>

#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

// The header as stored (little-endian, the machines lathe runs on).
struct RawHeader {
  char magic[8];
  uint32_t version;
  uint32_t k;
  int64_t vocab_size;
  int64_t n_sources;
  int64_t n_rows;
  uint64_t data_fingerprint;
  uint64_t reserved[2];  // zero: room for later fields
};
static_assert(sizeof(RawHeader) == kTeacherCacheHeaderBytes);

int64_t row_bytes(int64_t k) { return k * static_cast<int64_t>(sizeof(int32_t) + sizeof(float)); }

struct Xxh3State {
  Xxh3State() : s(XXH3_createState()) { XXH3_64bits_reset(s); }
  ~Xxh3State() { XXH3_freeState(s); }
  Xxh3State(const Xxh3State&) = delete;
  Xxh3State& operator=(const Xxh3State&) = delete;
  void update(const void* p, size_t n) { XXH3_64bits_update(s, p, n); }
  uint64_t digest() const { return XXH3_64bits_digest(s); }
  XXH3_state_t* s;
};

}  // namespace

uint64_t teacher_cache_fingerprint(std::span<const SftRow> sources) {
  Xxh3State h;
  for (const SftRow& r : sources) {
    const auto n = static_cast<int64_t>(r.tokens.size());
    h.update(&n, sizeof n);
    h.update(r.tokens.data(), r.tokens.size() * sizeof(int32_t));
    h.update(r.positions.data(), r.positions.size() * sizeof(int32_t));
    h.update(r.targets.data(), r.targets.size() * sizeof(int32_t));
  }
  return h.digest();
}

void write_teacher_cache(const std::string& path, const TeacherCacheInfo& info,
                         const std::function<void(const TeacherCacheRowFn& row)>& fill) {
  LATHE_CHECK_ARG(info.k >= 1 && info.k <= info.vocab_size && info.n_rows >= 0 && info.n_sources >= 0,
                  "[write_teacher_cache] k ", info.k, " must be in [1, vocab_size ", info.vocab_size, "]");
  RawHeader h{};
  std::memcpy(h.magic, kTeacherCacheMagic, sizeof h.magic);
  h.version = kTeacherCacheVersion;
  h.k = static_cast<uint32_t>(info.k);
  h.vocab_size = info.vocab_size;
  h.n_sources = info.n_sources;
  h.n_rows = info.n_rows;
  h.data_fingerprint = info.data_fingerprint;
  write_file_atomic(path, [&](const std::function<void(const void*, size_t)>& append) {
    Xxh3State sum;
    std::vector<char> buf;  // rows are written in blocks of about 1 MiB, not one write each
    buf.reserve(1 << 20);
    auto put = [&](const void* p, size_t n) {
      sum.update(p, n);
      const char* c = static_cast<const char*>(p);
      buf.insert(buf.end(), c, c + n);
      if (buf.size() >= (1u << 20)) {
        append(buf.data(), buf.size());
        buf.clear();
      }
    };
    put(&h, sizeof h);
    int64_t rows = 0;
    const auto k = static_cast<size_t>(info.k);
    fill([&](const int32_t* ids, const float* logits) {
      LATHE_CHECK_ARG(rows < info.n_rows, "[write_teacher_cache] more than the ", info.n_rows, " rows announced");
      put(ids, k * sizeof(int32_t));
      put(logits, k * sizeof(float));
      ++rows;
    });
    LATHE_CHECK_ARG(rows == info.n_rows, "[write_teacher_cache] ", rows, " rows written, ", info.n_rows, " announced");
    const uint64_t digest = sum.digest();
    const auto* d = reinterpret_cast<const char*>(&digest);
    buf.insert(buf.end(), d, d + sizeof digest);
    append(buf.data(), buf.size());
  });
}

TeacherCache TeacherCache::open(const std::string& path) {
  TeacherCache c;
  c.file_ = MappedFile::open(path);
  const size_t size = c.file_.size;
  LATHE_CHECK_FORMAT(size >= sizeof(RawHeader) + sizeof(uint64_t), path, ": ", size, " bytes: not a teacher cache"
                     " (too short for its header; written by lathe distill-cache?)");
  RawHeader h;
  std::memcpy(&h, c.file_.data, sizeof h);
  LATHE_CHECK_FORMAT(std::memcmp(h.magic, kTeacherCacheMagic, sizeof h.magic) == 0, path,
                     ": not a teacher cache (no LATHEKD magic; written by lathe distill-cache?)");
  LATHE_CHECK_FORMAT(h.version == kTeacherCacheVersion, path, ": teacher cache version ", h.version, ", this lathe"
                     " reads version ", kTeacherCacheVersion, " (rewrite it with lathe distill-cache)");
  LATHE_CHECK_FORMAT(h.k >= 1 && h.vocab_size >= h.k && h.n_sources >= 0 && h.n_rows >= 0 &&
                         h.n_rows <= (std::numeric_limits<int64_t>::max() - 72) / row_bytes(h.k),
                     path, ": a malformed teacher cache header (k ", h.k, ", vocab_size ", h.vocab_size, ", ",
                     h.n_rows, " rows)");
  const auto want = static_cast<size_t>(kTeacherCacheHeaderBytes + h.n_rows * row_bytes(h.k)) + sizeof(uint64_t);
  LATHE_CHECK_FORMAT(size == want, path, ": ", size, " bytes, but its header (", h.n_rows, " rows of k = ", h.k,
                     ") needs ", want, ": truncated or not fully written");
  uint64_t stored;
  std::memcpy(&stored, c.file_.data + size - sizeof stored, sizeof stored);
  LATHE_CHECK_FORMAT(XXH3_64bits(c.file_.data, size - sizeof stored) == stored, path,
                     ": checksum mismatch (the file was altered or torn after it was written)");
  c.info_ = {.k = h.k, .vocab_size = h.vocab_size, .n_sources = h.n_sources, .n_rows = h.n_rows,
             .data_fingerprint = h.data_fingerprint};
  return c;
}

CachedTeacher::CachedTeacher(TeacherCache cache, std::span<const SftRow> sources, int64_t top_k, int64_t vocab_size)
    : cache_(std::move(cache)) {
  const TeacherCacheInfo& c = cache_.info();
  const std::string& path = cache_.path();
  LATHE_CHECK_ARG(c.k == top_k, "distill.teacher_logits ", path, " holds the teacher's top ", c.k,
                  " logits per position but distill.top_k is ", top_k, ": set distill.top_k=", c.k,
                  " or rewrite the cache with lathe distill-cache at top_k ", top_k);
  LATHE_CHECK_ARG(c.vocab_size == vocab_size, "distill.teacher_logits ", path, " was written for a ", c.vocab_size,
                  "-token vocabulary but the student's vocab_size is ", vocab_size);
  first_row_.assign(sources.size() + 1, 0);
  for (size_t i = 0; i < sources.size(); ++i) first_row_[i + 1] = first_row_[i] + sources[i].n_targets;
  const auto n_sources = static_cast<int64_t>(sources.size());
  const uint64_t fp = teacher_cache_fingerprint(sources);
  LATHE_CHECK_ARG(c.n_sources == n_sources && c.n_rows == first_row_.back() && c.data_fingerprint == fp,
                  "distill.teacher_logits ", path, " was written for other data (", c.n_sources, " sequences, ",
                  c.n_rows, " trained positions, fingerprint ", c.data_fingerprint, ") than this run's (", n_sources,
                  " sequences, ", first_row_.back(), " trained positions, fingerprint ", fp, "): another data.train,"
                  " tokenizer, chat template, max_length, truncation, mask or packing_strategy wrapped; rewrite it"
                  " with lathe distill-cache on this recipe");
}

std::vector<int64_t> CachedTeacher::rows_of(const SftBatch& b) const {
  std::vector<int64_t> rows(b.targets.size(), -1);
  size_t at = 0;
  for (const SourceSpan& s : b.sources) {
    LATHE_ASSERT(s.index >= 0 && s.index + 1 < static_cast<int64_t>(first_row_.size()) &&
                 at + static_cast<size_t>(s.tokens) <= rows.size());
    int64_t row = first_row_[static_cast<size_t>(s.index)];
    for (int64_t t = 0; t < s.tokens; ++t, ++at)
      if (b.targets[at] != -100) rows[at] = row++;
    LATHE_ASSERT(row == first_row_[static_cast<size_t>(s.index) + 1]);
  }
  LATHE_ASSERT(at == rows.size(), "a batch without its source rows");
  return rows;
}

const int32_t* TeacherCache::ids(int64_t row) const {
  LATHE_ASSERT(row >= 0 && row < info_.n_rows);
  // Every field is 4 bytes and the header 64: the mapping (page-aligned) keeps them aligned.
  return reinterpret_cast<const int32_t*>(file_.data + kTeacherCacheHeaderBytes + row * row_bytes(info_.k));
}

const float* TeacherCache::logits(int64_t row) const {
  return reinterpret_cast<const float*>(ids(row) + info_.k);
}

}  // namespace lathe::posttrain
