// The teacher cache: rows written come back; a truncated, grown, altered or foreign file is a FormatError; a
// cache for other data or another k is refused; and the source rows that key it are the same whatever the
// packing (none or bfd) or the batch order, so every trained position of a batch finds its own cached row.
#include "lathe/posttrain/teacher_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "lathe/io/test_paths.h"

namespace lathe::posttrain {
namespace {

namespace fs = std::filesystem;

// Five examples of lengths 5, 3, 4, 2, 6; ids 10, 11, ...; position 2 of each unsupervised.
std::vector<TokenizedExample> examples() {
  std::vector<TokenizedExample> ex(5);
  const int64_t lengths[] = {5, 3, 4, 2, 6};
  int32_t next_id = 10;
  for (size_t e = 0; e < ex.size(); ++e)
    for (int64_t i = 0; i < lengths[e]; ++i) {
      ex[e].ids.push_back(next_id++);
      ex[e].supervised.push_back(i != 2);
    }
  return ex;
}

// A cache whose row r holds ids {r, r + 1} (mod V) and logits {r, -r}: each row says which it is.
TeacherCacheInfo write_numbered(const std::string& path, std::span<const SftRow> sources, int64_t V = 64) {
  TeacherCacheInfo info{.k = 2, .vocab_size = V, .n_sources = static_cast<int64_t>(sources.size()),
                        .data_fingerprint = teacher_cache_fingerprint(sources)};
  for (const SftRow& s : sources) info.n_rows += s.n_targets;
  write_teacher_cache(path, info, [&](const TeacherCacheRowFn& put) {
    for (int64_t r = 0; r < info.n_rows; ++r) {
      const int32_t ids[2] = {static_cast<int32_t>(r % V), static_cast<int32_t>((r + 1) % V)};
      const float logits[2] = {static_cast<float>(r), -static_cast<float>(r)};
      put(ids, logits);
    }
  });
  return info;
}

TEST(TeacherCache, RowsComeBackAsWritten) {
  const std::string dir = testing::scratch_dir("teacher_cache_rows");
  const std::vector<SftRow> sources = source_rows(build_rows(examples(), Packing::kNone, 8));
  const TeacherCacheInfo info = write_numbered(dir + "/c.kd", sources);
  const TeacherCache c = TeacherCache::open(dir + "/c.kd");
  EXPECT_EQ(c.info().k, 2);
  EXPECT_EQ(c.info().vocab_size, 64);
  EXPECT_EQ(c.info().n_sources, 5);
  EXPECT_EQ(c.info().n_rows, info.n_rows);
  EXPECT_EQ(c.info().data_fingerprint, info.data_fingerprint);
  EXPECT_EQ(static_cast<int64_t>(fs::file_size(dir + "/c.kd")), kTeacherCacheHeaderBytes + info.n_rows * 16 + 8);
  for (int64_t r = 0; r < info.n_rows; ++r) {
    EXPECT_EQ(c.ids(r)[0], r);
    EXPECT_EQ(c.logits(r)[1], -static_cast<float>(r));
  }
  // The writer refuses a count other than the header's, and leaves no file.
  TeacherCacheInfo more = info;
  more.n_rows += 1;
  EXPECT_THROW(write_teacher_cache(dir + "/short.kd", more, [&](const TeacherCacheRowFn&) {}), InvalidArgument);
  EXPECT_FALSE(fs::exists(dir + "/short.kd"));
}

void expect_format_error(const std::string& path, const std::string& want) {
  try {
    TeacherCache::open(path);
    ADD_FAILURE() << path << ": no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(TeacherCache, DamagedOrForeignFilesAreFormatErrors) {
  const std::string dir = testing::scratch_dir("teacher_cache_bad");
  const std::vector<SftRow> sources = source_rows(build_rows(examples(), Packing::kNone, 8));
  write_numbered(dir + "/c.kd", sources);
  const auto size = fs::file_size(dir + "/c.kd");
  fs::copy_file(dir + "/c.kd", dir + "/cut.kd");
  fs::resize_file(dir + "/cut.kd", size - 4);
  expect_format_error(dir + "/cut.kd", "truncated");
  fs::copy_file(dir + "/c.kd", dir + "/flip.kd");
  {
    std::fstream f(dir + "/flip.kd", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(kTeacherCacheHeaderBytes + 5);
    f.put('\x7f');
  }
  expect_format_error(dir + "/flip.kd", "checksum");
  std::ofstream(dir + "/other.kd") << std::string(200, 'x');
  expect_format_error(dir + "/other.kd", "not a teacher cache");
}

TEST(TeacherCache, OtherDataOrAnotherKIsRefused) {
  const std::string dir = testing::scratch_dir("teacher_cache_mismatch");
  const std::vector<SftRow> sources = source_rows(build_rows(examples(), Packing::kNone, 8));
  write_numbered(dir + "/c.kd", sources);
  auto refused = [&](std::span<const SftRow> s, int64_t k, int64_t V, const std::string& want) {
    try {
      CachedTeacher(TeacherCache::open(dir + "/c.kd"), s, k, V);
      ADD_FAILURE() << "no error for " << want;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  refused(sources, 3, 64, "distill.top_k is 3");
  refused(sources, 2, 65, "65");
  std::vector<SftRow> other = sources;
  other[1].tokens[0] += 1;  // another token: same counts, another fingerprint
  refused(other, 2, 64, "other data");
  std::vector<TokenizedExample> fewer = examples();
  fewer.pop_back();
  refused(source_rows(build_rows(fewer, Packing::kNone, 8)), 2, 64, "other data");
}

TEST(TeacherCache, EveryPackingAndOrderFindsEachPositionsOwnRow) {
  const std::string dir = testing::scratch_dir("teacher_cache_map");
  const std::vector<TokenizedExample> ex = examples();
  const std::vector<SftRow> plain = build_rows(ex, Packing::kNone, 8), packed = build_rows(ex, Packing::kBfd, 8);
  ASSERT_LT(packed.size(), plain.size());  // bfd packs several examples into a row
  const std::vector<SftRow> sources = source_rows(plain);
  EXPECT_EQ(teacher_cache_fingerprint(source_rows(packed)), teacher_cache_fingerprint(sources));
  write_numbered(dir + "/c.kd", sources);
  const CachedTeacher t(TeacherCache::open(dir + "/c.kd"), source_rows(packed), 2, 64);
  // Each trained position's cache row, by (example, position): the order write_numbered numbered them.
  std::map<std::pair<int64_t, int64_t>, int64_t> want;
  int64_t next = 0;
  for (size_t e = 0; e < ex.size(); ++e)
    for (size_t i = 0; i < ex[e].size(); ++i)
      if (plain[e].targets[i] != -100) want[{static_cast<int64_t>(e), static_cast<int64_t>(i)}] = next++;
  for (const std::vector<SftRow>* rows : {&plain, &packed}) {
    SftBatch b;  // the rows in reverse, as a shuffle might order them
    for (auto r = rows->rbegin(); r != rows->rend(); ++r) b.append(*r);
    const std::vector<int64_t> got = t.rows_of(b);
    ASSERT_EQ(got.size(), b.targets.size());
    size_t at = 0;
    int64_t checked = 0;
    for (const SourceSpan& s : b.sources)
      for (int64_t i = 0; i < s.tokens; ++i, ++at) {
        if (b.targets[at] == -100) {
          EXPECT_EQ(got[at], -1);
          continue;
        }
        EXPECT_EQ(got[at], (want[{s.index, i}])) << "example " << s.index << " position " << i;
        EXPECT_EQ(t.cache().ids(got[at])[0], got[at]);
        ++checked;
      }
    EXPECT_EQ(checked, next);
  }
}

TEST(TeacherCache, WrappedRowsAreTheirOwnSources) {
  const std::vector<SftRow> wrapped = build_rows(examples(), Packing::kWrapped, 8);
  const std::vector<SftRow> sources = source_rows(wrapped);
  ASSERT_EQ(sources.size(), wrapped.size());
  for (size_t i = 0; i < wrapped.size(); ++i) {
    EXPECT_EQ(sources[i].tokens, wrapped[i].tokens);
    EXPECT_EQ(sources[i].targets, wrapped[i].targets);
  }
  // Their attention crosses examples: another cut is other data.
  const std::vector<SftRow> unpacked = source_rows(build_rows(examples(), Packing::kNone, 8));
  EXPECT_NE(teacher_cache_fingerprint(sources), teacher_cache_fingerprint(unpacked));
}

}  // namespace
}  // namespace lathe::posttrain
