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

TokenizedExample kl_sequence(const TokenizedExample& x, const TokenizedExample& y, int64_t max_length) {
  const auto first_trained = [](const TokenizedExample& e) {
    size_t i = 1;  // position 0 is never a target
    while (i < e.size() && !e.supervised[i]) ++i;
    return i;
  };
  const size_t px = first_trained(x), py = first_trained(y);
  TokenizedExample kl;
  kl.ids.assign(x.ids.begin(), x.ids.begin() + static_cast<std::ptrdiff_t>(px));
  kl.supervised.assign(px, 0);
  kl.ids.insert(kl.ids.end(), y.ids.begin() + static_cast<std::ptrdiff_t>(py), y.ids.end());
  kl.supervised.insert(kl.supervised.end(), y.supervised.begin() + static_cast<std::ptrdiff_t>(py), y.supervised.end());
  if (max_length > 0 && kl.size() > static_cast<size_t>(max_length)) {
    kl.ids.resize(static_cast<size_t>(max_length));
    kl.supervised.resize(static_cast<size_t>(max_length));
  }
  return kl;
}

DpoBatch make_kto_batch(const UnpairedExamples& d, std::span<const int64_t> ids, int64_t max_length) {
  const auto k = static_cast<int64_t>(ids.size());
  LATHE_CHECK_ARG(k >= 2, "[make_kto_batch] KTO needs at least 2 examples per micro-batch, got ", k);
  std::vector<PreferencePair> pairs;  // {example j, its KL sequence}
  pairs.reserve(static_cast<size_t>(k));
  std::vector<int64_t> answers(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    const TokenizedExample& x = d.examples[static_cast<size_t>(ids[j])];
    answers[j] = ids[(j + k - 1) % k];
    pairs.emplace_back(x, kl_sequence(x, d.examples[static_cast<size_t>(answers[j])], max_length));
  }
  std::vector<const PreferencePair*> ptrs;
  for (const PreferencePair& p : pairs) ptrs.push_back(&p);
  DpoBatch b = make_dpo_batch(ptrs, ids);
  for (int64_t id : ids) b.desirable.push_back(d.desirable[static_cast<size_t>(id)]);
  b.kl_answer_ids = std::move(answers);
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
