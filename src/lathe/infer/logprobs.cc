#include "lathe/infer/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lathe/base/error.h"
#include "lathe/infer/logit_filters.h"
#include "lathe/infer/row_reduce.h"
#include "lathe/ops/vec_math.h"

namespace lathe {

double log_sum_exp(const float* z, int64_t V) {
  const float m = row::max_value(z, V);
  if (!(m > -std::numeric_limits<float>::infinity())) return m;
  // f32 exps summed in f64: the V-term sum keeps its precision at V = 150K.
  const double s = row::sum_f64(V, [z, m](int64_t v) { return vec::exp(z[v] - m); });
  return m + std::log(s);
}

RankedLogprob token_logprobs_top_k(const float* z, int64_t V, int32_t token, int k, std::span<TopLogprob> top,
                                   std::span<int32_t> ids) {
  LATHE_ASSERT(token >= 0 && token < V);
  const double lse = log_sum_exp(z, V);
  auto logprob = [&](int32_t v) { return static_cast<float>(z[v] - lse); };
  RankedLogprob r;
  r.logprob = logprob(token);
  const float zt = z[token];
  r.rank = static_cast<int64_t>(row::sum_f64(V, [z, zt](int64_t v) { return z[v] > zt ? 1.f : 0.f; })) + 1;
  const int64_t n = k < 0 ? V : std::min<int64_t>(k, V);
  if (n == V) {
    std::iota(ids.begin(), ids.begin() + V, 0);
    std::sort(ids.begin(), ids.begin() + V, TokenRank{z});
  } else if (n > 0) {
    select_top_k(z, V, n, ids.data());
  }
  bool has_token = false;
  for (int64_t i = 0; i < n; ++i) {
    top[i] = {ids[i], logprob(ids[i])};
    has_token |= ids[i] == token;
  }
  r.n_top = n;
  if (!has_token) top[r.n_top++] = {token, r.logprob};
  return r;
}

}  // namespace lathe
