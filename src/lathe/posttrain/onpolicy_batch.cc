#include "lathe/posttrain/onpolicy_batch.h"

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

// Example k of b: its first token's offset in b, its length, and the length of its prompt (the example's length
// when nothing is trained).
struct ExampleSplit {
  size_t at = 0, n = 0, prompt = 0;
  bool trained = false;
};

std::vector<ExampleSplit> split_examples(const SftBatch& b) {
  std::vector<ExampleSplit> out;
  size_t at = 0;
  for (const SourceSpan& s : b.sources) {
    ExampleSplit e{.at = at, .n = static_cast<size_t>(s.tokens), .prompt = static_cast<size_t>(s.tokens)};
    LATHE_ASSERT(e.n >= 1 && at + e.n <= b.tokens.size());
    // The last trained position, then back to the start of its run: position i's target is token i + 1, so the
    // prompt ends with the token at the run's first position.
    size_t last = e.n;
    for (size_t i = e.n; i-- > 0;)
      if (b.targets[at + i] != -100) {
        last = i;
        break;
      }
    if (last < e.n) {
      size_t first = last;
      while (first > 0 && b.targets[at + first - 1] != -100) --first;
      e.prompt = first + 1;
      e.trained = true;
    }
    out.push_back(e);
    at += e.n;
  }
  LATHE_ASSERT(at == b.tokens.size());
  return out;
}

}  // namespace

std::vector<std::vector<int32_t>> example_prompts(const SftBatch& b) {
  std::vector<std::vector<int32_t>> out;
  for (const ExampleSplit& e : split_examples(b)) {
    const auto from = b.tokens.begin() + static_cast<std::ptrdiff_t>(e.at);
    out.emplace_back(from, from + static_cast<std::ptrdiff_t>(e.prompt));
  }
  return out;
}

SftBatch with_completions(const SftBatch& b, const std::vector<std::vector<int32_t>>& completions) {
  const std::vector<ExampleSplit> ex = split_examples(b);
  LATHE_CHECK_ARG(completions.size() == ex.size(), "[with_completions] ", completions.size(),
                  " completions for a batch of ", ex.size(), " examples");
  SftBatch out;
  for (size_t k = 0; k < ex.size(); ++k) {
    const ExampleSplit& e = ex[k];
    SftRow row;
    row.sources.push_back({.index = b.sources[k].index, .tokens = 0});
    if (!e.trained) {  // nothing to continue: the example as it was (all its targets are -100)
      for (size_t i = e.at; i < e.at + e.n; ++i) {
        row.tokens.push_back(b.tokens[i]);
        row.positions.push_back(b.positions[i]);
        row.targets.push_back(b.targets[i]);
      }
    } else {
      const std::vector<int32_t>& c = completions[k];
      for (size_t i = e.at; i < e.at + e.prompt; ++i) {
        row.tokens.push_back(b.tokens[i]);
        row.positions.push_back(b.positions[i]);
      }
      row.tokens.insert(row.tokens.end(), c.begin(), c.end());
      const int32_t last = row.positions[e.prompt - 1];
      for (size_t i = 0; i < c.size(); ++i) row.positions.push_back(last + static_cast<int32_t>(i + 1));
      // Untrained prompt positions, then from the prompt's last token on each next token is a target.
      row.targets.assign(e.prompt - 1, -100);
      for (size_t i = e.prompt - 1; i + 1 < row.tokens.size(); ++i) {
        row.targets.push_back(row.tokens[i + 1]);
        ++row.n_targets;
      }
      row.targets.push_back(-100);
    }
    row.sources[0].tokens = static_cast<int64_t>(row.tokens.size());
    out.append(row);
  }
  return out;
}

}  // namespace lathe::posttrain
