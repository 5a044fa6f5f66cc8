#include "lathe/posttrain/dpo_batch.h"

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

void append_sequence(DpoBatch& b, const TokenizedExample& ex, int32_t seq) {
  const size_t n = ex.ids.size();
  int64_t len = 0;
  for (size_t i = 0; i < n; ++i) {
    b.tokens.push_back(ex.ids[i]);
    b.positions.push_back(static_cast<int32_t>(i));
    b.targets.push_back(i + 1 < n ? ex.ids[i + 1] : -100);
    b.seq.push_back(seq);
    const bool response = i + 1 < n && ex.supervised[i + 1];
    b.completion.push_back(response ? 1 : 0);
    len += response;
  }
  b.completion_len[static_cast<size_t>(seq)] = len;
}

}  // namespace

DpoBatch make_dpo_batch(std::span<const PreferencePair* const> pairs, std::span<const int64_t> ids) {
  LATHE_CHECK_ARG(!pairs.empty() && pairs.size() == ids.size(), "[make_dpo_batch] ", pairs.size(), " pairs, ",
                  ids.size(), " ids");
  DpoBatch b;
  const auto k = static_cast<int32_t>(pairs.size());
  b.completion_len.assign(2 * pairs.size(), 0);
  for (int32_t j = 0; j < k; ++j) append_sequence(b, pairs[j]->first, j);
  for (int32_t j = 0; j < k; ++j) append_sequence(b, pairs[j]->second, k + j);
  b.pair_ids.assign(ids.begin(), ids.end());
  return b;
}

std::vector<double> sequence_logps(const DpoBatch& b, std::span<const float> lp) {
  LATHE_CHECK_ARG(lp.size() == b.tokens.size(), "[sequence_logps] ", lp.size(), " log-probs for ", b.tokens.size(),
                  " tokens");
  std::vector<double> s(b.completion_len.size(), 0.0);
  for (size_t i = 0; i < lp.size(); ++i)
    if (b.completion[i]) s[static_cast<size_t>(b.seq[i])] += static_cast<double>(lp[i]);
  return s;
}

}  // namespace lathe::posttrain
