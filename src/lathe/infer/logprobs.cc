#include "lathe/infer/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "lathe/base/error.h"
#include "lathe/infer/logit_filters.h"
#include "lathe/ops/vec_math.h"

namespace lathe {

double log_sum_exp(const float* z, int64_t V) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t v = 0; v < V; ++v) m = std::max(m, z[v]);
  if (!(m > -std::numeric_limits<float>::infinity())) return m;
  double s = 0;  // f32 exps summed in f64: the V-term sum keeps its precision at V = 150K
#pragma omp simd reduction(+ : s)
  for (int64_t v = 0; v < V; ++v) s += vec::exp(z[v] - m);
  return m + std::log(s);
}

TokenLogprobs token_logprobs_top_k(const float* z, int64_t V, int32_t token, int k, std::span<TopLogprob> top,
                                   std::span<int32_t> ids) {
  LATHE_ASSERT(token >= 0 && token < V);
  const double lse = log_sum_exp(z, V);
  auto logprob = [&](int32_t v) { return static_cast<float>(z[v] - lse); };
  TokenLogprobs r;
  r.logprob = logprob(token);
  const float zt = z[token];
  int64_t above = 0;
#pragma omp simd reduction(+ : above)
  for (int64_t v = 0; v < V; ++v) above += z[v] > zt;
  r.rank = above + 1;
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
