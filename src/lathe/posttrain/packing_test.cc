// Packing: best-fit decreasing against the packings of tests/fixtures/posttrain/packing_bfd.json (written by
// the committed make_packing_bfd.py), and the layout of packed rows: positions restart at 0 per example and
// no target crosses an example boundary.
#include "lathe/posttrain/packing.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/io/test_paths.h"
#include "lathe/posttrain/sft_rows.h"

namespace lathe::posttrain {
namespace {

TEST(SftPacking, BestFitDecreasingMatchesTheReferencePackings) {
  std::ifstream in(testing::fixtures_root() + "/posttrain/packing_bfd.json");
  ASSERT_TRUE(in) << "tests/fixtures/posttrain/packing_bfd.json";
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_FALSE(j["cases"].empty());
  for (const auto& c : j["cases"]) {
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    const int64_t capacity = c["capacity"].get<int64_t>();
    const auto rows = pack_bfd(lengths, capacity);
    EXPECT_EQ(rows, c["rows"].get<std::vector<std::vector<int64_t>>>()) << "capacity " << capacity;
    for (const auto& row : rows) {  // whole examples, never over capacity
      int64_t used = 0;
      for (int64_t i : row) used += lengths[static_cast<size_t>(i)];
      EXPECT_LE(used, capacity);
    }
  }
}

TEST(SftPacking, RejectsAnExampleLongerThanARow) {
  const std::vector<int64_t> lengths = {3, 9};
  EXPECT_THROW(pack_bfd(lengths, 8), InvalidArgument);
}

TEST(SftPacking, PackedRowsRestartPositionsAndKeepTargetsInsideExamples) {
  std::vector<TokenizedExample> ex(3);
  const int64_t lengths[] = {5, 3, 4};
  int32_t next_id = 10;
  for (size_t e = 0; e < ex.size(); ++e)
    for (int64_t i = 0; i < lengths[e]; ++i) {
      ex[e].ids.push_back(next_id++);
      ex[e].supervised.push_back(1);
    }
  const std::vector<SftRow> rows = build_rows(ex, Packing::kBfd, 8);  // {5, 3} and {4}
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2}));
  // The last token of each example has no target: the next example's first token is not predicted from it.
  EXPECT_EQ(rows[0].targets[4], -100);
  EXPECT_EQ(rows[0].targets[7], -100);
  EXPECT_EQ(rows[0].targets[0], ex[0].ids[1]);
  EXPECT_EQ(rows[0].n_targets, 4 + 2);
  // The forward batch sees each example as a sequence of its own.
  SftBatch b;
  for (const auto& r : rows) b.append(r);
  EXPECT_EQ(b.forward_batch().n_seqs(), 3);
  // wrapped: one stream cut into rows, positions per row, targets across the examples' boundaries.
  const std::vector<SftRow> wrapped = build_rows(ex, Packing::kWrapped, 8);
  ASSERT_EQ(wrapped.size(), 2u);
  EXPECT_EQ(wrapped[0].targets[4], ex[1].ids[0]);
  EXPECT_EQ(wrapped[1].positions, (std::vector<int32_t>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace lathe::posttrain
