#include "lathe/posttrain/grpo_loss.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

constexpr const char* kAggregationNames[] = {"grpo", "bnpo", "dr_grpo", "dapo", "seq_mean_token_sum", "token_sum_norm"};
static_assert(std::size(kAggregationNames) == static_cast<size_t>(GrpoAggregation::kCount));
constexpr const char* kKlNames[] = {"k1", "k2", "k3"};
static_assert(std::size(kKlNames) == static_cast<size_t>(GrpoKl::kCount));
constexpr const char* kLevelNames[] = {"token", "sequence", "sequence_token"};
static_assert(std::size(kLevelNames) == static_cast<size_t>(GrpoRatioLevel::kCount));

template <class E, size_t K>
E from_name(const char* const (&names)[K], const std::string& name) {
  for (size_t i = 0; i < K; ++i)
    if (name == names[i]) return static_cast<E>(i);
  return E::kCount;
}

// KL_t and ∂KL_t/∂x for d = r − x (∂d/∂x = −1).
void kl_estimate(GrpoKl k, double d, double& kl, double& dkl_dx) {
  switch (k) {
    case GrpoKl::kK1: kl = -d, dkl_dx = 1; return;
    case GrpoKl::kK2: kl = 0.5 * d * d, dkl_dx = -d; return;
    case GrpoKl::kK3: kl = std::expm1(d) - d, dkl_dx = 1 - std::exp(d); return;  // exp(d) − d − 1, ≥ 0
    case GrpoKl::kCount: break;
  }
  LATHE_ASSERT(false);
}

}  // namespace

const char* grpo_aggregation_name(GrpoAggregation a) { return kAggregationNames[static_cast<size_t>(a)]; }
GrpoAggregation grpo_aggregation_from_name(const std::string& n) { return from_name<GrpoAggregation>(kAggregationNames, n); }
const char* grpo_kl_name(GrpoKl k) { return kKlNames[static_cast<size_t>(k)]; }
GrpoKl grpo_kl_from_name(const std::string& n) { return from_name<GrpoKl>(kKlNames, n); }
const char* grpo_ratio_level_name(GrpoRatioLevel l) { return kLevelNames[static_cast<size_t>(l)]; }
GrpoRatioLevel grpo_ratio_level_from_name(const std::string& n) { return from_name<GrpoRatioLevel>(kLevelNames, n); }

GrpoLossValue grpo_loss_value(std::span<const float> x, const GrpoLossInputs& in, const GrpoLossOptions& o) {
  const size_t n = x.size();
  const size_t b = in.advantages.size();
  LATHE_CHECK_ARG(in.offsets.size() == b + 1 && in.offsets.front() == 0 && in.offsets.back() == static_cast<int64_t>(n),
                  "[grpo_loss] offsets of ", in.offsets.size(), " entries (ending at ",
                  in.offsets.empty() ? -1 : in.offsets.back(), ") for ", b, " advantages and ", n, " log-probs");
  LATHE_CHECK_ARG(in.old_logps.size() == n && in.mask.size() == n, "[grpo_loss] ", n, " log-probs, ",
                  in.old_logps.size(), " old log-probs, ", in.mask.size(), " mask entries");
  LATHE_CHECK_ARG(in.ref_logps.size() == n || (in.ref_logps.empty() && o.beta == 0), "[grpo_loss] ",
                  in.ref_logps.size(), " reference log-probs for ", n, " tokens (beta ", o.beta,
                  " needs them; only beta 0 runs without)");
  LATHE_CHECK_ARG(in.is_weights.empty() || in.is_weights.size() == n, "[grpo_loss] ", in.is_weights.size(),
                  " mismatch weights for ", n, " tokens");
  LATHE_CHECK_ARG(in.truncated.empty() || in.truncated.size() == b, "[grpo_loss] ", in.truncated.size(),
                  " truncation flags for ", b, " completions");
  LATHE_CHECK_ARG(in.entropy.empty() || in.entropy.size() == n, "[grpo_loss] ", in.entropy.size(),
                  " entropies for ", n, " tokens");
  LATHE_CHECK_ARG(o.epsilon_low >= 0 && o.epsilon_low < 1 && o.epsilon_high >= 0, "[grpo_loss] need 0 <= epsilon_low < 1"
                  " and epsilon_high >= 0, got ", o.epsilon_low, " and ", o.epsilon_high);
  LATHE_CHECK_ARG(o.epsilon_c == 0 || o.epsilon_c > 1, "[grpo_loss] the dual clip epsilon_c must be > 1 (or 0: off), got ",
                  o.epsilon_c);
  LATHE_CHECK_ARG(o.aggregation != GrpoAggregation::kDrGrpo || o.max_completion_length > 0,
                  "[grpo_loss] the dr_grpo aggregation divides by max_completion_length: set it (> 0)");

  // The trained mask (truncated completions off when asked), per-row token counts, B′.
  std::vector<uint8_t> m(in.mask.begin(), in.mask.end());
  std::vector<double> row_tokens(b, 0.0);
  double tokens = 0, rows = 0;
  for (size_t i = 0; i < b; ++i) {
    const bool drop = o.mask_truncated_completions && !in.truncated.empty() && in.truncated[i];
    for (auto t = static_cast<size_t>(in.offsets[i]); t < static_cast<size_t>(in.offsets[i + 1]); ++t) {
      if (drop) m[t] = 0;
      row_tokens[i] += m[t] ? 1 : 0;
    }
    tokens += row_tokens[i];
    rows += row_tokens[i] > 0 ? 1 : 0;
  }
  // ∂L/∂ℓ_t of a trained token of row i.
  const auto agg_weight = [&](size_t i) -> double {
    switch (o.aggregation) {
      case GrpoAggregation::kGrpo: return 1 / (rows * row_tokens[i]);
      case GrpoAggregation::kBnpo: return 1 / tokens;
      case GrpoAggregation::kDrGrpo: return 1 / (static_cast<double>(b) * static_cast<double>(o.max_completion_length));
      case GrpoAggregation::kDapo: return 1 / (o.dapo_tokens_per_micro_batch > 0 ? o.dapo_tokens_per_micro_batch : tokens);
      case GrpoAggregation::kSeqMeanTokenSum: return 1 / rows;
      case GrpoAggregation::kTokenSumNorm: return 1 / (o.token_sum_norm > 0 ? o.token_sum_norm : static_cast<double>(b));
      case GrpoAggregation::kCount: break;
    }
    LATHE_ASSERT(false);
    return 0;
  };

  GrpoLossValue r;
  r.d_logps.assign(n, 0.0);
  GrpoLossMetrics& mt = r.metrics;
  const bool have_ref = !in.ref_logps.empty();
  double kl_sum = 0, clip_cnt = 0, dual_cnt = 0, ent_sum = 0, ratio_sum = 0;
  double ratio_min = std::numeric_limits<double>::infinity(), ratio_max = -ratio_min;
  const double cap = o.log_ratio_clamp;
  for (size_t i = 0; i < b; ++i) {
    if (row_tokens[i] == 0) continue;
    const auto t0 = static_cast<size_t>(in.offsets[i]), t1 = static_cast<size_t>(in.offsets[i + 1]);
    const double a = in.advantages[i];
    const double w_agg = agg_weight(i);
    // GSPO: the sequence's mean log-ratio over its trained tokens.
    double seq_log = 0;
    for (size_t t = t0; t < t1; ++t)
      if (m[t]) seq_log += (static_cast<double>(x[t]) - in.old_logps[t]) / row_tokens[i];
    const bool seq_capped = std::fabs(seq_log) > cap;
    seq_log = std::clamp(seq_log, -cap, cap);
    double seq_dcoef = 0;  // Σ_t ∂L/∂s_i (sequence level)
    for (size_t t = t0; t < t1; ++t) {
      if (!m[t]) continue;
      double log_coef = seq_log;
      bool capped = seq_capped;
      if (o.ratio_level == GrpoRatioLevel::kToken) {
        log_coef = static_cast<double>(x[t]) - in.old_logps[t];
        capped = std::fabs(log_coef) > cap;
        log_coef = std::clamp(log_coef, -cap, cap);
      }
      const double coef = std::exp(log_coef);
      const double unclipped = coef * a;
      const double clipped = std::clamp(coef, 1 - o.epsilon_low, 1 + o.epsilon_high) * a;
      double pg = -std::min(unclipped, clipped);
      // ∂pg/∂coef: −A through the unclipped term; 0 where the clipped one is taken (coef is outside the range).
      double dpg = unclipped <= clipped ? -a : 0.0;
      if (clipped < unclipped) clip_cnt += 1;
      if (o.epsilon_c > 0 && a < 0 && pg > -o.epsilon_c * a) {
        pg = -o.epsilon_c * a;
        dpg = 0;
        dual_cnt += 1;
      }
      const double w = in.is_weights.empty() ? 1.0 : in.is_weights[t];
      double ell = w * pg;
      double dx = 0;  // ∂ℓ_t/∂x_t other than through the coefficient
      if (have_ref) {
        double kl = 0, dkl = 0;
        kl_estimate(o.kl, static_cast<double>(in.ref_logps[t]) - x[t], kl, dkl);
        if (o.kl_clamp > 0 && std::fabs(kl) > o.kl_clamp) {
          kl = std::clamp(kl, -o.kl_clamp, o.kl_clamp);
          dkl = 0;
        }
        kl_sum += kl;
        ell += o.beta * kl;
        dx += o.beta * dkl;
      }
      r.loss += w_agg * ell;
      const double c = w_agg * w * dpg;  // ∂L/∂coef_t
      r.d_logps[t] += w_agg * dx;
      if (o.ratio_level == GrpoRatioLevel::kToken) {
        if (!capped) r.d_logps[t] += c * coef;  // ∂coef/∂x_t = coef
      } else if (o.ratio_level == GrpoRatioLevel::kSequenceToken) {
        r.d_logps[t] += c * coef;  // value s_i, ∂/∂x_t = sg[s_i]
      } else {
        seq_dcoef += c;
      }
      ratio_sum += coef;
      ratio_min = std::min(ratio_min, coef);
      ratio_max = std::max(ratio_max, coef);
      if (!in.entropy.empty()) ent_sum += in.entropy[t];
    }
    if (o.ratio_level == GrpoRatioLevel::kSequence && !seq_capped) {
      // ∂s_i/∂x_u = s_i·m_u / |o_i|
      const double s = std::exp(seq_log);
      for (size_t t = t0; t < t1; ++t)
        if (m[t]) r.d_logps[t] += seq_dcoef * s / row_tokens[i];
    }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  mt.trained_tokens = tokens;
  if (tokens > 0) {
    mt.kl = have_ref ? kl_sum / tokens : nan;
    mt.pg_clipfrac = clip_cnt / tokens;
    mt.pg_clipfrac_lower = dual_cnt / tokens;
    mt.entropy = in.entropy.empty() ? nan : ent_sum / tokens;
    mt.is_ratio_mean = ratio_sum / tokens;
    mt.is_ratio_min = ratio_min;
    mt.is_ratio_max = ratio_max;
  } else {
    mt.kl = have_ref ? 0 : nan;
    mt.entropy = in.entropy.empty() ? nan : 0;
  }
  if (b > 0) {
    mt.completion_min_length = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < b; ++i) {
      const auto len = static_cast<double>(in.offsets[i + 1] - in.offsets[i]);
      mt.completion_mean_length += len / static_cast<double>(b);
      mt.completion_min_length = std::min(mt.completion_min_length, len);
      mt.completion_max_length = std::max(mt.completion_max_length, len);
      if (!in.truncated.empty() && in.truncated[i]) mt.completion_clipped_ratio += 1 / static_cast<double>(b);
    }
  }
  return r;
}

Tensor grpo_loss(const Tensor& logps, const GrpoLossInputs& in, const GrpoLossOptions& o, GrpoLossMetrics* metrics) {
  LATHE_CHECK_ARG(logps.dim() == 1 && logps.dtype() == DType::kF32, "[grpo_loss] logps must be [N] f32, got ",
                  shape_str(logps.shape()));
  const std::vector<float> x = logps.to_vector();
  GrpoLossValue v = grpo_loss_value(x, in, o);
  if (metrics) *metrics = v.metrics;
  Tensor out = Tensor::from_data({1}, {static_cast<float>(v.loss)});
  if (needs_grad({&logps})) {
    const Shape shape = logps.shape();
    record(out, "grpo_loss", {logps}, [d = std::move(v.d_logps), shape](const Tensor& g) -> std::vector<Tensor> {
      const double gs = static_cast<double>(g.item());
      std::vector<float> dx(d.size());
      for (size_t t = 0; t < d.size(); ++t) dx[t] = static_cast<float>(gs * d[t]);
      return {Tensor::from_data(shape, dx)};
    });
  }
  return out;
}

}  // namespace lathe::posttrain
