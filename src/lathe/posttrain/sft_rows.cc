#include "lathe/posttrain/sft_rows.h"

#include "lathe/base/error.h"
#include "lathe/posttrain/packing.h"

namespace lathe::posttrain {

namespace {

void append_example(SftRow& row, const TokenizedExample& ex, int64_t index) {
  const size_t n = ex.ids.size();
  row.sources.push_back({.index = index, .tokens = static_cast<int64_t>(n)});
  for (size_t i = 0; i < n; ++i) {
    row.tokens.push_back(ex.ids[i]);
    row.positions.push_back(static_cast<int32_t>(i));
    const bool trained = i + 1 < n && ex.supervised[i + 1];
    row.targets.push_back(trained ? ex.ids[i + 1] : -100);
    row.n_targets += trained;
  }
}

}  // namespace

SftRow example_row(const TokenizedExample& ex, int64_t index) {
  SftRow r;
  append_example(r, ex, index);
  return r;
}

std::vector<SftRow> build_rows(std::span<const TokenizedExample> examples, Packing packing, int64_t max_length) {
  std::vector<SftRow> rows;
  if (packing == Packing::kNone) {
    for (size_t i = 0; i < examples.size(); ++i) rows.push_back(example_row(examples[i], static_cast<int64_t>(i)));
  } else if (packing == Packing::kBfd) {
    std::vector<int64_t> lengths;
    for (const auto& ex : examples) lengths.push_back(static_cast<int64_t>(ex.ids.size()));
    for (const auto& bin : pack_bfd(lengths, max_length)) {
      SftRow row;
      for (int64_t i : bin) append_example(row, examples[static_cast<size_t>(i)], i);
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
      if (row.n_targets > 0) {
        row.sources.push_back({.index = static_cast<int64_t>(rows.size()),  // the row is its own source
                               .tokens = static_cast<int64_t>(end - start)});
        rows.push_back(std::move(row));
      }
    }
  }
  return rows;
}

std::vector<SftRow> source_rows(std::span<const SftRow> rows) {
  int64_t n = 0;
  for (const SftRow& r : rows) n += static_cast<int64_t>(r.sources.size());
  std::vector<SftRow> out(static_cast<size_t>(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const SftRow& r : rows) {
    size_t at = 0;
    for (const SourceSpan& s : r.sources) {
      LATHE_ASSERT(s.index >= 0 && s.index < n && !seen[s.index] && at + s.tokens <= r.tokens.size());
      seen[s.index] = true;
      SftRow& u = out[static_cast<size_t>(s.index)];
      const auto b = static_cast<std::ptrdiff_t>(at), e = static_cast<std::ptrdiff_t>(at + s.tokens);
      u.tokens.assign(r.tokens.begin() + b, r.tokens.begin() + e);
      u.positions.assign(r.positions.begin() + b, r.positions.begin() + e);
      u.targets.assign(r.targets.begin() + b, r.targets.begin() + e);
      for (int32_t y : u.targets) u.n_targets += y != -100;
      u.sources.push_back({.index = s.index, .tokens = s.tokens});
      at += static_cast<size_t>(s.tokens);
    }
    LATHE_ASSERT(at == r.tokens.size());
  }
  return out;
}

void SftBatch::append(const SftRow& r) {
  tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end());
  positions.insert(positions.end(), r.positions.begin(), r.positions.end());
  targets.insert(targets.end(), r.targets.begin(), r.targets.end());
  sources.insert(sources.end(), r.sources.begin(), r.sources.end());
  n_targets += r.n_targets;
}

}  // namespace lathe::posttrain
