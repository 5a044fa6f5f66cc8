#include "lathe/posttrain/grpo_advantages.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

constexpr const char* kAdvantageNames[] = {"grpo", "dr_grpo", "rloo"};
static_assert(std::size(kAdvantageNames) == static_cast<size_t>(GrpoAdvantage::kCount));
constexpr const char* kScaleNames[] = {"group", "batch", "none"};
static_assert(std::size(kScaleNames) == static_cast<size_t>(GrpoRewardScale::kCount));
constexpr double kNa = std::numeric_limits<double>::quiet_NaN();

// Mean and Bessel std (ddof 1; 0 with fewer than 2 values) of the non-NaN values of v[begin, end).
struct Moments {
  double mean = 0, std = 0;
  int64_t n = 0;
};
Moments moments(const std::vector<double>& v, size_t begin, size_t end) {
  Moments m;
  for (size_t i = begin; i < end; ++i)
    if (!std::isnan(v[i])) {
      m.mean += v[i];
      ++m.n;
    }
  if (m.n == 0) return m;
  m.mean /= static_cast<double>(m.n);
  double ss = 0;
  for (size_t i = begin; i < end; ++i)
    if (!std::isnan(v[i])) ss += (v[i] - m.mean) * (v[i] - m.mean);
  m.std = m.n > 1 ? std::sqrt(ss / static_cast<double>(m.n - 1)) : 0;
  return m;
}

}  // namespace

const char* grpo_advantage_name(GrpoAdvantage a) { return kAdvantageNames[static_cast<size_t>(a)]; }
GrpoAdvantage grpo_advantage_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kAdvantageNames); ++i)
    if (name == kAdvantageNames[i]) return static_cast<GrpoAdvantage>(i);
  return GrpoAdvantage::kCount;
}
const char* grpo_reward_scale_name(GrpoRewardScale s) { return kScaleNames[static_cast<size_t>(s)]; }
GrpoRewardScale grpo_reward_scale_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kScaleNames); ++i)
    if (name == kScaleNames[i]) return static_cast<GrpoRewardScale>(i);
  return GrpoRewardScale::kCount;
}

GrpoAdvantages grpo_advantages(const std::vector<std::vector<double>>& rewards, int64_t group_size,
                               const GrpoAdvantageOptions& o) {
  const auto b = static_cast<int64_t>(rewards.size());
  const int64_t g = group_size;
  LATHE_CHECK_ARG(g >= 2 && b > 0 && b % g == 0, "[grpo_advantages] ", b,
                  " samples are not whole groups of group_size ", g, " (>= 2)");
  const size_t f = rewards[0].size();
  LATHE_CHECK_ARG(f > 0, "[grpo_advantages] no reward function");
  for (const auto& row : rewards)
    LATHE_CHECK_ARG(row.size() == f, "[grpo_advantages] a sample has ", row.size(), " rewards, the first ", f);
  LATHE_CHECK_ARG(o.reward_weights.empty() || o.reward_weights.size() == f, "[grpo_advantages] ",
                  o.reward_weights.size(), " reward weights for ", f, " reward functions");
  const auto weight = [&](size_t k) { return o.reward_weights.empty() ? 1.0 : o.reward_weights[k]; };
  const auto ub = static_cast<size_t>(b), ug = static_cast<size_t>(g);

  GrpoAdvantages r;
  r.function_means.assign(f, 0.0);
  // Each function's column, normalised inside its groups for GDPO.
  std::vector<std::vector<double>> cols(f, std::vector<double>(ub));
  for (size_t k = 0; k < f; ++k) {
    for (size_t i = 0; i < ub; ++i) cols[k][i] = rewards[i][k];
    r.function_means[k] = moments(cols[k], 0, ub).n > 0 ? moments(cols[k], 0, ub).mean : kNa;
    if (!o.per_reward_normalisation) continue;
    for (size_t s = 0; s < ub; s += ug) {
      const Moments m = moments(cols[k], s, s + ug);
      for (size_t i = s; i < s + ug; ++i)
        if (!std::isnan(cols[k][i])) cols[k][i] = (cols[k][i] - m.mean) / (m.std + o.eps);
    }
  }
  // The weighted sum (NaN when no function applies).
  r.rewards.assign(ub, kNa);
  for (size_t i = 0; i < ub; ++i)
    for (size_t k = 0; k < f; ++k)
      if (!std::isnan(cols[k][i])) r.rewards[i] = (std::isnan(r.rewards[i]) ? 0.0 : r.rewards[i]) + weight(k) * cols[k][i];

  const Moments all = moments(r.rewards, 0, ub);
  r.advantages.assign(ub, 0.0);
  int64_t zero_std_groups = 0;
  for (size_t s = 0; s < ub; s += ug) {
    const Moments m = moments(r.rewards, s, s + ug);
    if (m.std == 0) ++zero_std_groups;  // also a group with at most one applicable sample
    for (size_t i = s; i < s + ug; ++i) {
      if (std::isnan(r.rewards[i])) continue;  // all N/A: A = 0
      double a = r.rewards[i] - m.mean;
      if (o.type == GrpoAdvantage::kDrGrpo) {
        r.advantages[i] = a;
        continue;
      }
      // rloo: r_i minus the mean of the other applicable samples = n/(n−1)·(r_i − mean); alone in its group: 0.
      if (o.type == GrpoAdvantage::kRloo) a = m.n > 1 ? a * static_cast<double>(m.n) / static_cast<double>(m.n - 1) : 0;
      if (o.scale == GrpoRewardScale::kGroup) a /= m.std + o.eps;
      if (o.scale == GrpoRewardScale::kBatch) a /= all.std + o.eps;
      r.advantages[i] = a;
    }
  }
  r.frac_reward_zero_std = static_cast<double>(zero_std_groups) / static_cast<double>(b / g);
  r.reward_mean = all.n > 0 ? all.mean : kNa;
  r.reward_std = all.std;
  r.reward_min = kNa;
  r.reward_max = kNa;
  for (double x : r.rewards) {
    if (std::isnan(x)) continue;
    r.reward_min = std::isnan(r.reward_min) ? x : std::min(r.reward_min, x);
    r.reward_max = std::isnan(r.reward_max) ? x : std::max(r.reward_max, x);
  }
  for (double a : r.advantages) {
    r.advantage_abs_mean += std::fabs(a) / static_cast<double>(b);
    r.advantage_nonzero_frac += (a != 0 ? 1.0 : 0.0) / static_cast<double>(b);
  }
  return r;
}

double soft_overlong_punishment(int64_t completion_tokens, int64_t max_tokens, int64_t cache_tokens) {
  LATHE_CHECK_ARG(cache_tokens > 0 && cache_tokens <= max_tokens, "[soft_overlong_punishment] overlong buffer ",
                  cache_tokens, " tokens must be in (0, max_completion_length ", max_tokens, "]");
  const int64_t expected = max_tokens - cache_tokens;
  if (completion_tokens <= expected) return 0;
  if (completion_tokens <= max_tokens)
    return static_cast<double>(expected - completion_tokens) / static_cast<double>(cache_tokens);
  return -1;
}

}  // namespace lathe::posttrain
