// The distillation teacher cache: a teacher's top-k logits for every trained position of a dataset, written
// once by `lathe distill-cache` and read (memory-mapped) by `lathe distill` with distill.teacher_logits in place
// of running the teacher (docs/distill.md "The teacher cache"). Little-endian:
//   header  [64 bytes]  magic "LATHEKD\0", u32 version (1), u32 k, i64 vocab_size, i64 n_sources, i64 n_rows,
//                       u64 data_fingerprint, 16 reserved bytes (0)
//   rows    [n_rows]    k i32 ids then their k f32 logits (largest first, ties to the smaller id): the raw
//                       teacher logits (after its final soft-cap, before any temperature)
//   trailer [8 bytes]   u64 XXH3-64 of everything before it
// Rows are the trained positions (target ≠ -100) of the source rows (sft_rows.h source_rows) in index order,
// each source's in position order. Sources are examples (or wrapped rows), not training rows, so one cache
// serves any batch size, shuffle, seed, world size, and packing none or bfd; data_fingerprint (XXH3-64 of the
// sources' tokens, positions and targets) ties it to the dataset, tokenizer, template, max_length and masks.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lathe/io/mapped_file.h"
#include "lathe/posttrain/sft_rows.h"

namespace lathe::posttrain {

inline constexpr char kTeacherCacheMagic[8] = {'L', 'A', 'T', 'H', 'E', 'K', 'D', '\0'};
inline constexpr uint32_t kTeacherCacheVersion = 1;
inline constexpr int64_t kTeacherCacheHeaderBytes = 64;

struct TeacherCacheInfo {
  int64_t k = 0;
  int64_t vocab_size = 0;
  int64_t n_sources = 0;  // source rows
  int64_t n_rows = 0;     // cached positions: the sources' trained targets
  uint64_t data_fingerprint = 0;
};

// XXH3-64 of the sources' lengths, tokens, positions and targets, in order: what the teacher read and which
// of its positions are cached.
uint64_t teacher_cache_fingerprint(std::span<const SftRow> sources);

// One cached row: the teacher's top-k ids [k] and logits [k].
using TeacherCacheRowFn = std::function<void(const int32_t* ids, const float* logits)>;

// Writes a cache crash-safely (a temporary name, fsynced, renamed): `fill` calls its argument once per row,
// info.n_rows times (InvalidArgument otherwise, and no file is left).
void write_teacher_cache(const std::string& path, const TeacherCacheInfo& info,
                         const std::function<void(const TeacherCacheRowFn& row)>& fill);

class TeacherCache {
 public:
  // Maps and checks the file: FormatError naming the path for another magic or version, a size other than
  // the header's counts imply (truncated or grown), or a checksum mismatch (a torn or altered file).
  static TeacherCache open(const std::string& path);

  const TeacherCacheInfo& info() const { return info_; }
  const std::string& path() const { return file_.path; }
  const int32_t* ids(int64_t row) const;   // [k]
  const float* logits(int64_t row) const;  // [k]

 private:
  MappedFile file_;
  TeacherCacheInfo info_;
};

// A cache checked against a run's data, mapping each position of a batch to its cache row.
class CachedTeacher {
 public:
  // sources: the run's source rows (source_rows of its training rows). InvalidArgument naming the file unless
  // the cache was written with k = top_k, for a vocab_size-token vocabulary and for these sources.
  CachedTeacher(TeacherCache cache, std::span<const SftRow> sources, int64_t top_k, int64_t vocab_size);

  const TeacherCache& cache() const { return cache_; }
  // The cache row of each position of `b` [N], -1 where it trains nothing.
  std::vector<int64_t> rows_of(const SftBatch& b) const;

 private:
  TeacherCache cache_;
  std::vector<int64_t> first_row_;  // [n_sources + 1]: each source's first cache row
};

}  // namespace lathe::posttrain
