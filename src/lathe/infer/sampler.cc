#include "lathe/infer/sampler.h"

#include <algorithm>
#include <cmath>

#include "lathe/base/error.h"

namespace lathe {

void check_sampling_options(const SamplingOptions& opts) {
  // NaN fails every comparison, so each check is written as the accepted case.
  LATHE_CHECK_ARG(std::isfinite(opts.temperature) && opts.temperature >= 0.f,
                  "[sample] temperature must be a finite number >= 0 (0: greedy), got ", opts.temperature);
  LATHE_CHECK_ARG(opts.top_k >= 0, "[sample] top_k must be >= 0 (0: off), got ", opts.top_k);
  LATHE_CHECK_ARG(opts.top_p > 0.f && opts.top_p <= 1.f, "[sample] top_p must be in (0, 1] (1: off), got ",
                  opts.top_p);
}

Sampler::Sampler(const SamplingOptions& opts) : opts_(opts), rng_(opts.seed) { check_sampling_options(opts); }

int32_t Sampler::sample(const float* logits, int64_t vocab) {
  LATHE_CHECK_ARG(vocab > 0, "[sample] empty logits");
  if (opts_.temperature <= 0.f) {
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i)
      if (logits[i] > logits[best]) best = i;
    return static_cast<int32_t>(best);
  }
  auto& c = scratch_;
  c.resize(vocab);
  for (int64_t i = 0; i < vocab; ++i) c[i] = {logits[i] / opts_.temperature, static_cast<int32_t>(i)};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  int64_t n = vocab;
  if (opts_.top_k > 0 && opts_.top_k < n) {
    std::partial_sort(c.begin(), c.begin() + opts_.top_k, c.end(), by_logit);
    n = opts_.top_k;
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  // Softmax over the survivors, then keep the smallest prefix whose mass reaches top_p.
  const float mx = c[0].first;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) total += (c[i].first = std::exp(c[i].first - mx));
  if (opts_.top_p < 1.f) {
    double cum = 0;
    int64_t keep = 0;
    while (keep < n) {
      cum += c[keep].first / total;
      ++keep;
      if (cum >= opts_.top_p) break;
    }
    n = keep;
    total = 0;
    for (int64_t i = 0; i < n; ++i) total += c[i].first;
  }
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int64_t i = 0; i < n; ++i) {
    u -= c[i].first;
    if (u <= 0) return c[i].second;
  }
  return c[n - 1].second;
}

}  // namespace lathe
