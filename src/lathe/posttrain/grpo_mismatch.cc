#include "lathe/posttrain/grpo_mismatch.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

constexpr const char* kNames[] = {"none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"};
static_assert(std::size(kNames) == static_cast<size_t>(GrpoMismatchMode::kCount));

}  // namespace

const char* grpo_mismatch_mode_name(GrpoMismatchMode m) { return kNames[static_cast<size_t>(m)]; }
GrpoMismatchMode grpo_mismatch_mode_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i]) return static_cast<GrpoMismatchMode>(i);
  return GrpoMismatchMode::kCount;
}

GrpoMismatch grpo_mismatch(std::span<const float> old_logps, std::span<const float> sampler_logps,
                           std::span<const uint8_t> mask, std::span<const int64_t> offsets,
                           const GrpoMismatchOptions& o) {
  const size_t n = old_logps.size();
  LATHE_CHECK_ARG(sampler_logps.size() == n && mask.size() == n && offsets.size() >= 1 && offsets.front() == 0 &&
                      offsets.back() == static_cast<int64_t>(n),
                  "[grpo_mismatch] ", n, " old log-probs, ", sampler_logps.size(), " sampler log-probs, ",
                  mask.size(), " mask entries and offsets ending at ", offsets.empty() ? -1 : offsets.back());
  LATHE_CHECK_ARG(o.c_max > 0 && o.c_min >= 0 && o.c_min < o.c_max, "[grpo_mismatch] need 0 <= C_min < C_max, got ",
                  o.c_min, " and ", o.c_max);
  const bool truncate = o.mode == GrpoMismatchMode::kTokenTruncate || o.mode == GrpoMismatchMode::kSequenceTruncate;
  const bool sequence = o.mode == GrpoMismatchMode::kSequenceTruncate || o.mode == GrpoMismatchMode::kSequenceMask;
  // The applied weight of a raw ratio w, and whether w is out of range.
  const auto apply = [&](double w, bool& clipped) -> double {
    clipped = w > o.c_max || (!truncate && w < o.c_min);
    if (truncate) return std::min(w, o.c_max);
    return clipped ? 0.0 : w;
  };
  GrpoMismatch r;
  r.weights.assign(n, 0.f);
  double sum_d = 0, sum_pd = 0, cnt = 0, sp = 0, sq = 0, spp = 0, sqq = 0, spq = 0;
  double w_sum = 0, w_cnt = 0, clipped_cnt = 0;
  r.weight_max = -std::numeric_limits<double>::infinity();
  r.weight_min = std::numeric_limits<double>::infinity();
  const auto add_weight = [&](double raw, double& applied) {
    bool clipped = false;
    applied = o.mode == GrpoMismatchMode::kNone ? 1.0 : apply(raw, clipped);
    w_sum += applied;
    w_cnt += 1;
    clipped_cnt += clipped ? 1 : 0;
    r.weight_max = std::max(r.weight_max, applied);
    r.weight_min = std::min(r.weight_min, applied);
  };
  for (size_t s = 0; s + 1 < offsets.size(); ++s) {
    double seq_delta = 0, seq_tokens = 0;
    for (auto t = static_cast<size_t>(offsets[s]); t < static_cast<size_t>(offsets[s + 1]); ++t) {
      if (!mask[t]) continue;
      const double d = static_cast<double>(old_logps[t]) - sampler_logps[t];
      const double p = std::exp(static_cast<double>(old_logps[t])), q = std::exp(static_cast<double>(sampler_logps[t]));
      sum_d += std::fabs(d);
      r.logp_diff_max = std::max(r.logp_diff_max, std::fabs(d));
      sum_pd += std::fabs(p - q);
      sp += p, sq += q, spp += p * p, sqq += q * q, spq += p * q;
      cnt += 1;
      seq_delta += d;
      seq_tokens += 1;
      if (!sequence) {
        double w = 1;
        add_weight(std::exp(d), w);
        r.weights[t] = static_cast<float>(w);
      }
    }
    if (sequence && seq_tokens > 0) {
      double w = 1;
      add_weight(std::exp(o.sequence_mean ? seq_delta / seq_tokens : seq_delta), w);
      for (auto t = static_cast<size_t>(offsets[s]); t < static_cast<size_t>(offsets[s + 1]); ++t)
        if (mask[t]) r.weights[t] = static_cast<float>(w);
    }
  }
  if (cnt > 0) {
    r.logp_diff_mean = sum_d / cnt;
    r.prob_diff_mean = sum_pd / cnt;
    const double cov = spq / cnt - (sp / cnt) * (sq / cnt);
    const double vp = spp / cnt - (sp / cnt) * (sp / cnt), vq = sqq / cnt - (sq / cnt) * (sq / cnt);
    r.probs_pearson_corr = vp > 0 && vq > 0 ? cov / std::sqrt(vp * vq) : std::numeric_limits<double>::quiet_NaN();
  }
  if (w_cnt > 0) {
    r.weight_mean = w_sum / w_cnt;
    r.frac_clipped = clipped_cnt / w_cnt;
  } else {
    r.weight_max = r.weight_min = 1;
  }
  return r;
}

}  // namespace lathe::posttrain
