#include "lathe/posttrain/sft_rows.h"

#include "lathe/posttrain/packing.h"

namespace lathe::posttrain {

namespace {

void append_example(SftRow& row, const TokenizedExample& ex) {
  const size_t n = ex.ids.size();
  for (size_t i = 0; i < n; ++i) {
    row.tokens.push_back(ex.ids[i]);
    row.positions.push_back(static_cast<int32_t>(i));
    const bool trained = i + 1 < n && ex.supervised[i + 1];
    row.targets.push_back(trained ? ex.ids[i + 1] : -100);
    row.n_targets += trained;
  }
}

}  // namespace

SftRow example_row(const TokenizedExample& ex) {
  SftRow r;
  append_example(r, ex);
  return r;
}

std::vector<SftRow> build_rows(std::span<const TokenizedExample> examples, Packing packing, int64_t max_length) {
  std::vector<SftRow> rows;
  if (packing == Packing::kNone) {
    for (const auto& ex : examples) rows.push_back(example_row(ex));
  } else if (packing == Packing::kBfd) {
    std::vector<int64_t> lengths;
    for (const auto& ex : examples) lengths.push_back(static_cast<int64_t>(ex.ids.size()));
    for (const auto& bin : pack_bfd(lengths, max_length)) {
      SftRow row;
      for (int64_t i : bin) append_example(row, examples[static_cast<size_t>(i)]);
      rows.push_back(std::move(row));
    }
  } else {  // wrapped: one stream, cut every max_length tokens; a target may be the next example's first token
    std::vector<int32_t> ids;
    std::vector<uint8_t> sup;
    for (const auto& ex : examples) {
      ids.insert(ids.end(), ex.ids.begin(), ex.ids.end());
      sup.insert(sup.end(), ex.supervised.begin(), ex.supervised.end());
    }
    for (size_t start = 0; start < ids.size(); start += static_cast<size_t>(max_length)) {
      const size_t end = std::min(ids.size(), start + static_cast<size_t>(max_length));
      SftRow row;
      for (size_t i = start; i < end; ++i) {
        row.tokens.push_back(ids[i]);
        row.positions.push_back(static_cast<int32_t>(i - start));
        const bool trained = i + 1 < end && sup[i + 1];
        row.targets.push_back(trained ? ids[i + 1] : -100);
        row.n_targets += trained;
      }
      if (row.n_targets > 0) rows.push_back(std::move(row));
    }
  }
  return rows;
}

void SftBatch::append(const SftRow& r) {
  tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  positions.insert(positions.end(), r.positions.begin(), r.positions.end());
  targets.insert(targets.end(), r.targets.begin(), r.targets.end());
  n_targets += r.n_targets;
}

}  // namespace lathe::posttrain
