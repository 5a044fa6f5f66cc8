// The GRPO family's loss (grpo_loss.h, grpo_advantages.h, grpo_mismatch.h): parity with the TRL-style fixture
// (tests/fixtures/posttrain reference.json "grpo": advantages, loss_grpo with the LoRA gradients 'grpo.grad.<name>',
// loss_dapo, loss_dr_grpo, loss_gspo); every other option against the spec's formulas (specs/posttrain.md §5)
// written out here as plain scalar code on small hand-built inputs; gradients against central differences.
#include "lathe/posttrain/grpo_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/io/safetensors.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/posttrain/grpo_advantages.h"
#include "lathe/posttrain/grpo_batch.h"
#include "lathe/posttrain/grpo_mismatch.h"
#include "lathe/posttrain/test_policy.h"

namespace lathe::posttrain {
namespace {

using nlohmann::json;
constexpr double kNa = std::numeric_limits<double>::quiet_NaN();

// ---- The fixture ----

struct Fixture {
  json ref;
  std::vector<Trajectory> trajectories;
  std::vector<float> old_logps;  // [N]
  GrpoBatch batch;
};

Fixture grpo_fixture() {
  Fixture f;
  f.ref = testing::posttrain_reference().at("grpo");
  const SafetensorsFile st = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
  const json& comps = f.ref.at("completions");
  for (size_t i = 0; i < comps.size(); ++i) {
    Trajectory t;
    t.prompt = f.ref.at("prompt").get<std::vector<int32_t>>();
    t.completion = comps[i].get<std::vector<int32_t>>();
    t.rewards = {f.ref.at("rewards")[i].get<double>()};
    const std::vector<float> old = st.tensor("grpo.old_logps." + std::to_string(i)).to(DType::kF32).to_vector();
    EXPECT_EQ(old.size(), t.completion.size());
    f.old_logps.insert(f.old_logps.end(), old.begin(), old.end());
    f.trajectories.push_back(t);
  }
  f.batch = make_grpo_batch(f.trajectories);
  return f;
}

// Loss and log-prob tolerances as dpo_loss_test: the f32 forward's log-probs agree with PyTorch's to ~1e-6,
// and every loss term is O(|A|·Δ log-prob): 1e-5 relative plus 2e-6 absolute. Gradients 1e-3 relative (norm).
TEST(GrpoLoss, MatchesTheFixtureAdvantagesLossesAndLoraGradients) {
  Fixture f = grpo_fixture();
  const json& ref = f.ref;
  std::vector<std::vector<double>> rewards;
  for (const Trajectory& t : f.trajectories) rewards.push_back(t.rewards);
  const GrpoAdvantages adv = grpo_advantages(rewards, static_cast<int64_t>(rewards.size()), {.eps = 1e-4});
  for (size_t i = 0; i < rewards.size(); ++i) {
    const double want = ref.at("advantages")[i].get<double>();
    EXPECT_NEAR(adv.advantages[i], want, 1e-6 * std::fabs(want)) << i;
  }
  testing::FixturePolicy p = testing::fixture_policy();
  const Tensor targets = Tensor::from_data_i32({f.batch.n_tokens()}, f.batch.targets);
  std::vector<float> ref_lp;
  {
    NoGradGuard ng;
    ref_lp = p.model->token_logprobs(f.batch.forward_batch(), targets, {.lora = false}).logprobs.to_vector();
  }
  const std::vector<uint8_t> mask(f.old_logps.size(), 1);
  const GrpoLossInputs in{.offsets = f.batch.offsets, .old_logps = f.old_logps, .ref_logps = ref_lp, .mask = mask,
                          .advantages = adv.advantages};
  const double eps = ref.at("epsilon").get<double>(), beta = ref.at("beta").get<double>();
  const GrpoLossOptions base{.epsilon_low = eps, .epsilon_high = eps, .beta = beta, .kl = GrpoKl::kK3,
                             .aggregation = GrpoAggregation::kGrpo};
  const Tensor lp = p.model->token_logprobs(f.batch.forward_batch(), targets).logprobs;  // [N], recorded
  const Tensor loss = grpo_loss(lp, in, base);
  const auto near = [](double got, double want) { return std::fabs(got - want) <= 2e-6 + 1e-5 * std::fabs(want); };
  EXPECT_PRED2(near, loss.item(), ref.at("loss_grpo").get<double>());
  backward(loss);
  const SafetensorsFile st = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
  int checked = 0;
  p.lora->for_each_param([&](const std::string& name, Tensor& t, int) {
    std::string peft = name;  // PEFT's trainable names carry the adapter name
    peft.insert(peft.rfind(".weight"), ".default");
    const std::vector<float> want = st.tensor("grpo.grad." + peft).to(DType::kF32).to_vector();
    ASSERT_TRUE(t.grad().defined()) << name;
    const std::vector<float> got = t.grad().to_vector();
    ASSERT_EQ(got.size(), want.size()) << name;
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      d2 += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      r2 += static_cast<double>(want[i]) * want[i];
    }
    EXPECT_LE(std::sqrt(d2), 1e-3 * std::sqrt(r2) + 1e-9) << name;
    ++checked;
    t.zero_grad();
  });
  int in_file = 0;
  for (const SafetensorsEntry& e : st.entries()) in_file += e.name.rfind("grpo.grad.", 0) == 0;
  EXPECT_EQ(checked, in_file);
  EXPECT_GT(checked, 0);

  NoGradGuard ng;
  const Tensor lp0 = p.model->token_logprobs(f.batch.forward_batch(), targets).logprobs;
  GrpoLossOptions o = base;
  o.aggregation = GrpoAggregation::kDapo;
  EXPECT_PRED2(near, grpo_loss(lp0, in, o).item(), ref.at("loss_dapo").get<double>());
  o.aggregation = GrpoAggregation::kDrGrpo;
  o.max_completion_length = ref.at("max_completion_length").get<int64_t>();
  EXPECT_PRED2(near, grpo_loss(lp0, in, o).item(), ref.at("loss_dr_grpo").get<double>());
  o = base;
  o.ratio_level = GrpoRatioLevel::kSequence;
  EXPECT_PRED2(near, grpo_loss(lp0, in, o).item(), ref.at("loss_gspo").get<double>());
}

// ---- Advantages against the spec's formulas ----

// The spec's advantage of every sample, written directly: weighted sums skipping N/A, all-N/A samples A = 0
// and out of the statistics, std with Bessel's correction, rloo's explicit leave-one-out mean.
std::vector<double> spec_advantages(const std::vector<std::vector<double>>& rw, size_t g, const GrpoAdvantageOptions& o) {
  const size_t b = rw.size(), f = rw[0].size();
  const auto w = [&](size_t k) { return o.reward_weights.empty() ? 1.0 : o.reward_weights[k]; };
  const auto stats = [&](const std::vector<double>& v, size_t s, size_t e, double& mean, double& sd) {
    double n = 0, sum = 0, ss = 0;
    for (size_t i = s; i < e; ++i)
      if (!std::isnan(v[i])) n += 1, sum += v[i];
    mean = n > 0 ? sum / n : 0;
    for (size_t i = s; i < e; ++i)
      if (!std::isnan(v[i])) ss += (v[i] - mean) * (v[i] - mean);
    sd = n > 1 ? std::sqrt(ss / (n - 1)) : 0;
    return n;
  };
  std::vector<std::vector<double>> col(f, std::vector<double>(b));
  for (size_t k = 0; k < f; ++k)
    for (size_t i = 0; i < b; ++i) col[k][i] = rw[i][k];
  if (o.per_reward_normalisation)
    for (size_t k = 0; k < f; ++k)
      for (size_t s = 0; s < b; s += g) {
        double mean, sd;
        stats(col[k], s, s + g, mean, sd);
        for (size_t i = s; i < s + g; ++i) col[k][i] = (col[k][i] - mean) / (sd + o.eps);  // NaN stays NaN
      }
  std::vector<double> r(b, kNa);
  for (size_t i = 0; i < b; ++i) {
    bool any = false;
    double s = 0;
    for (size_t k = 0; k < f; ++k)
      if (!std::isnan(col[k][i])) any = true, s += w(k) * col[k][i];
    if (any) r[i] = s;
  }
  double all_mean, all_sd;
  stats(r, 0, b, all_mean, all_sd);
  std::vector<double> a(b, 0.0);
  for (size_t s = 0; s < b; s += g) {
    double mean, sd;
    const double n = stats(r, s, s + g, mean, sd);
    for (size_t i = s; i < s + g; ++i) {
      if (std::isnan(r[i])) continue;
      double x = r[i] - mean;
      if (o.type == GrpoAdvantage::kRloo) {
        double others = 0;
        for (size_t j = s; j < s + g; ++j)
          if (j != i && !std::isnan(r[j])) others += r[j];
        x = n > 1 ? r[i] - others / (n - 1) : 0;
      }
      if (o.type != GrpoAdvantage::kDrGrpo && o.scale == GrpoRewardScale::kGroup) x /= sd + o.eps;
      if (o.type != GrpoAdvantage::kDrGrpo && o.scale == GrpoRewardScale::kBatch) x /= all_sd + o.eps;
      a[i] = x;
    }
  }
  return a;
}

TEST(GrpoAdvantages, EveryTypeAndScaleIsTheSpecFormulaWithNotApplicableRewards) {
  // Three groups of 4, two reward functions: N/A entries, an all-N/A sample, a zero-std group (the third).
  const std::vector<std::vector<double>> rw = {{1.0, 0.5}, {0.0, kNa}, {0.5, 0.25}, {0.0, 1.0},
                                               {kNa, kNa}, {2.0, 0.0}, {1.0, kNa}, {-1.0, 0.5},
                                               {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0}, {1.0, 0.0}};
  int cases = 0;
  for (auto type : {GrpoAdvantage::kGrpo, GrpoAdvantage::kDrGrpo, GrpoAdvantage::kRloo})
    for (auto scale : {GrpoRewardScale::kGroup, GrpoRewardScale::kBatch, GrpoRewardScale::kNone})
      for (bool gdpo : {false, true})
        for (const std::vector<double>& weights : {std::vector<double>{}, std::vector<double>{1.0, 0.3}}) {
          const GrpoAdvantageOptions o{.type = type, .scale = scale, .eps = 1e-6, .reward_weights = weights,
                                       .per_reward_normalisation = gdpo};
          const GrpoAdvantages got = grpo_advantages(rw, 4, o);
          const std::vector<double> want = spec_advantages(rw, 4, o);
          const std::string what = std::string(grpo_advantage_name(type)) + " " + grpo_reward_scale_name(scale) +
                                   (gdpo ? " gdpo" : "") + (weights.empty() ? "" : " weighted");
          for (size_t i = 0; i < rw.size(); ++i) EXPECT_NEAR(got.advantages[i], want[i], 1e-9) << what << " " << i;
          EXPECT_EQ(got.advantages[4], 0.0) << what;  // all N/A
          EXPECT_DOUBLE_EQ(got.frac_reward_zero_std, 1.0 / 3.0) << what;
          ++cases;
        }
  EXPECT_EQ(cases, 36);
  const GrpoAdvantages a = grpo_advantages(rw, 4, {});
  EXPECT_DOUBLE_EQ(a.function_means[1], (0.5 + 0.25 + 1.0 + 0.0 + 0.5 + 0.0 * 4) / 9);  // over the applicable ones
  EXPECT_DOUBLE_EQ(a.rewards[1], 0.0);  // N/A adds nothing
  EXPECT_TRUE(std::isnan(a.rewards[4]));
  EXPECT_DOUBLE_EQ(a.reward_max, 2.0);
  EXPECT_DOUBLE_EQ(a.reward_min, -0.5);
  double abs_mean = 0, nonzero = 0;
  for (double x : a.advantages) abs_mean += std::fabs(x) / 12, nonzero += (x != 0) / 12.0;
  EXPECT_DOUBLE_EQ(a.advantage_abs_mean, abs_mean);
  EXPECT_DOUBLE_EQ(a.advantage_nonzero_frac, nonzero);
  EXPECT_THROW(grpo_advantages(rw, 5, {}), InvalidArgument);
  EXPECT_THROW(grpo_advantages(rw, 4, {.reward_weights = {1.0}}), InvalidArgument);
}

TEST(GrpoAdvantages, SoftOverlongPunishmentCountsTokens) {
  const int64_t lmax = 20, cache = 4;  // punished from 17 tokens on
  for (int64_t len : {0, 10, 16, 17, 18, 20, 21, 100}) {
    const double want = len <= lmax - cache ? 0.0 : len <= lmax ? static_cast<double>((lmax - cache) - len) / cache : -1.0;
    EXPECT_DOUBLE_EQ(soft_overlong_punishment(len, lmax, cache), want) << len;
  }
  EXPECT_DOUBLE_EQ(soft_overlong_punishment(20, 20, 4), -1.0);
  EXPECT_THROW(soft_overlong_punishment(1, 4, 5), InvalidArgument);
  EXPECT_THROW(soft_overlong_punishment(1, 4, 0), InvalidArgument);
}

// ---- The per-token loss against the spec's formula ----

struct Case {
  std::vector<int64_t> offsets;
  std::vector<float> x, old, ref, w, entropy;  // [N]
  std::vector<uint8_t> mask;                   // [N]
  std::vector<double> adv;                     // [B]
  std::vector<uint8_t> truncated;              // [B]
  GrpoLossInputs inputs(bool weights) const {
    return {.offsets = offsets, .old_logps = old, .ref_logps = ref, .mask = mask, .advantages = adv,
            .is_weights = weights ? std::span<const float>(w) : std::span<const float>(), .truncated = truncated,
            .entropy = entropy};
  }
};

// Four completions (3, 1, 5 and 4 tokens): a masked token, a truncated completion, log-ratios on both sides of
// both clip edges (ε 0.2 / 0.28: ±0.22, ±0.25 are away from them), one far above the dual clip's ln 3 on a
// negative advantage, and one of 1.5 for a clamp of 1.
Case hand_case() {
  Case c;
  c.offsets = {0, 3, 4, 9, 13};
  const std::vector<float> log_ratio = {0.1f, -0.3f, 0.25f, 0.05f, 1.5f, -0.02f, 0.3f, -0.25f, 0.12f,
                                        -0.4f, 0.0f, 0.22f, -0.1f};
  c.x = {-1.2f, -0.4f, -2.5f, -0.9f, -3.1f, -0.7f, -1.6f, -2.2f, -0.3f, -1.1f, -0.8f, -1.9f, -0.6f};
  for (size_t t = 0; t < c.x.size(); ++t) c.old.push_back(c.x[t] - log_ratio[t]);
  const std::vector<float> ref_diff = {0.3f, -0.2f, 0.1f, 0.5f, -0.6f, 0.07f, 0.2f, -0.1f, 0.4f, 0.15f, -0.3f, 0.0f, 0.25f};
  for (size_t t = 0; t < c.x.size(); ++t) c.ref.push_back(c.x[t] + ref_diff[t]);
  c.w = {1.0f, 0.5f, 2.0f, 1.5f, 1.0f, 0.0f, 0.8f, 1.2f, 1.0f, 3.0f, 0.9f, 1.1f, 0.7f};
  c.entropy = {0.5f, 1.0f, 1.5f, 2.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.6f, 0.7f, 0.8f, 0.9f, 1.1f};
  c.mask = {1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1};
  c.adv = {0.8, 0.3, -1.1, -0.5};
  c.truncated = {0, 0, 0, 1};
  return c;
}

// The spec (§5.2-5.4) as one function of the policy log-probs x; x0 is the point where GSPO-token's stop-gradients
// are taken (s_i,t = sg[s_i]·exp(x_t − sg[x_t]): at x = x0 its value is s_i, its gradient s_i per token).
double spec_loss(const Case& c, const std::vector<double>& x, const std::vector<double>& x0, const GrpoLossOptions& o,
                 bool weights) {
  const size_t b = c.adv.size();
  std::vector<std::vector<double>> ell(b);  // ℓ of each trained token of each row
  for (size_t i = 0; i < b; ++i) {
    std::vector<size_t> toks;
    for (auto t = static_cast<size_t>(c.offsets[i]); t < static_cast<size_t>(c.offsets[i + 1]); ++t)
      if (c.mask[t] && !(o.mask_truncated_completions && c.truncated[i])) toks.push_back(t);
    const auto seq_ratio = [&](const std::vector<double>& at) {
      double s = 0;
      for (size_t t : toks) s += at[t] - c.old[t];
      return std::exp(std::clamp(s / static_cast<double>(toks.size()), -o.log_ratio_clamp, o.log_ratio_clamp));
    };
    for (size_t t : toks) {
      double coef = std::exp(std::clamp(x[t] - c.old[t], -o.log_ratio_clamp, o.log_ratio_clamp));
      if (o.ratio_level == GrpoRatioLevel::kSequence) coef = seq_ratio(x);
      if (o.ratio_level == GrpoRatioLevel::kSequenceToken) coef = seq_ratio(x0) * std::exp(x[t] - x0[t]);
      const double a = c.adv[i];
      double pg = -std::min(coef * a, std::clamp(coef, 1 - o.epsilon_low, 1 + o.epsilon_high) * a);
      if (o.epsilon_c > 0 && a < 0) pg = std::min(pg, -o.epsilon_c * a);
      const double d = c.ref[t] - x[t];
      double kl = o.kl == GrpoKl::kK1 ? -d : o.kl == GrpoKl::kK2 ? 0.5 * d * d : std::exp(d) - d - 1;
      if (o.kl_clamp > 0) kl = std::clamp(kl, -o.kl_clamp, o.kl_clamp);
      ell[i].push_back((weights ? c.w[t] : 1.0) * pg + o.beta * kl);
    }
  }
  double rows = 0, tokens = 0, sum = 0, seq_mean = 0, seq_sum = 0;
  for (const auto& r : ell) {
    if (r.empty()) continue;
    rows += 1;
    double s = 0;
    for (double v : r) s += v;
    tokens += static_cast<double>(r.size());
    sum += s;
    seq_mean += s / static_cast<double>(r.size());
    seq_sum += s;
  }
  switch (o.aggregation) {
    case GrpoAggregation::kGrpo: return seq_mean / rows;
    case GrpoAggregation::kBnpo: return sum / tokens;
    case GrpoAggregation::kDrGrpo: return sum / (static_cast<double>(b) * static_cast<double>(o.max_completion_length));
    case GrpoAggregation::kDapo: return sum / (o.dapo_tokens_per_micro_batch > 0 ? o.dapo_tokens_per_micro_batch : tokens);
    case GrpoAggregation::kSeqMeanTokenSum: return seq_sum / rows;
    case GrpoAggregation::kTokenSumNorm: return sum / (o.token_sum_norm > 0 ? o.token_sum_norm : static_cast<double>(b));
    default: return kNa;
  }
}

std::vector<GrpoLossOptions> loss_configs() {
  std::vector<GrpoLossOptions> out;
  for (int a = 0; a < static_cast<int>(GrpoAggregation::kCount); ++a)
    for (int k = 0; k < static_cast<int>(GrpoKl::kCount); ++k)
      for (int l = 0; l < static_cast<int>(GrpoRatioLevel::kCount); ++l) {
        GrpoLossOptions o{.epsilon_low = 0.2, .epsilon_high = 0.28, .beta = 0.04 * (1 + k), .kl = static_cast<GrpoKl>(k),
                          .aggregation = static_cast<GrpoAggregation>(a), .ratio_level = static_cast<GrpoRatioLevel>(l),
                          .max_completion_length = 8};
        if (o.aggregation == GrpoAggregation::kDapo && k == 1) o.dapo_tokens_per_micro_batch = 17.5;
        if (o.aggregation == GrpoAggregation::kTokenSumNorm && k == 2) o.token_sum_norm = 3.0;
        out.push_back(o);
        o.epsilon_c = 3.0;  // dual clip
        o.mask_truncated_completions = true;
        o.kl_clamp = 0.05;
        out.push_back(o);
        o.log_ratio_clamp = 1.0;
        o.beta = 0;
        out.push_back(o);
      }
  return out;
}

std::string describe(const GrpoLossOptions& o) {
  return std::string(grpo_aggregation_name(o.aggregation)) + " " + grpo_kl_name(o.kl) + " " +
         grpo_ratio_level_name(o.ratio_level) + " beta " + std::to_string(o.beta) + " eps_c " +
         std::to_string(o.epsilon_c) + " clamp " + std::to_string(o.log_ratio_clamp);
}

TEST(GrpoLoss, EveryVariantIsTheSpecFormulaAndItsGradientCentralDifferences) {
  const Case c = hand_case();
  const std::vector<double> x0(c.x.begin(), c.x.end());
  int n = 0;
  for (const GrpoLossOptions& o0 : loss_configs())
    for (bool weights : {false, true}) {
      GrpoLossOptions o = o0;
      Case cc = c;
      if (o.beta == 0) cc.ref.clear();  // β = 0: no reference at all
      const GrpoLossValue v = grpo_loss_value(cc.x, cc.inputs(weights), o);
      const std::string what = describe(o) + (weights ? " is-weights" : "");
      const double want = spec_loss(c, x0, x0, o, weights);
      EXPECT_NEAR(v.loss, want, 1e-12 + 1e-10 * std::fabs(want)) << what;
      for (size_t t = 0; t < x0.size(); ++t) {
        const double h = 1e-6;
        std::vector<double> up = x0, dn = x0;
        up[t] += h;
        dn[t] -= h;
        const double fd = (spec_loss(c, up, x0, o, weights) - spec_loss(c, dn, x0, o, weights)) / (2 * h);
        EXPECT_NEAR(v.d_logps[t], fd, 1e-7 + 1e-6 * std::fabs(fd)) << what << " token " << t;
      }
      ++n;
    }
  EXPECT_EQ(n, 6 * 3 * 3 * 3 * 2);
}

// The tensor front: its value is grpo_loss_value's and its recorded gradient passes the finite-difference
// check of ops/gradcheck.h (f32 perturbations of 1e-3; the inputs stay ≥ 0.02 away from every clip edge).
TEST(GrpoLoss, TensorFrontPassesGradcheck) {
  const Case c = hand_case();
  for (GrpoLossOptions o : {GrpoLossOptions{.beta = 0.04, .aggregation = GrpoAggregation::kGrpo},
                            GrpoLossOptions{.epsilon_high = 0.28, .epsilon_c = 3, .beta = 0.1, .kl = GrpoKl::kK2,
                                            .aggregation = GrpoAggregation::kDapo},
                            GrpoLossOptions{.beta = 0.04, .kl = GrpoKl::kK1, .aggregation = GrpoAggregation::kBnpo,
                                            .ratio_level = GrpoRatioLevel::kSequence}}) {
    const GrpoLossInputs in = c.inputs(true);
    const auto fn = [&](const std::vector<Tensor>& xs) { return grpo_loss(xs[0], in, o); };
    Tensor x = Tensor::from_data({static_cast<int64_t>(c.x.size())}, c.x);
    x.set_requires_grad(true);
    const testing::GradCheckResult r = testing::gradcheck(fn, {x}, 1e-3f);
    EXPECT_LT(r.max_rel_err, 1e-2) << describe(o) << "\n" << r.report;
    NoGradGuard ng;
    EXPECT_NEAR(grpo_loss(x, in, o).item(), grpo_loss_value(c.x, in, o).loss, 1e-7);
  }
}

// §5.7's per-batch metrics, counted here from their definitions.
TEST(GrpoLoss, MetricsAreTheirDefinitions) {
  const Case c = hand_case();
  const GrpoLossOptions o{.epsilon_low = 0.2, .epsilon_high = 0.2, .epsilon_c = 3, .beta = 0.04, .kl = GrpoKl::kK3,
                          .aggregation = GrpoAggregation::kGrpo, .mask_truncated_completions = true};
  const GrpoLossMetrics m = grpo_loss_value(c.x, c.inputs(false), o).metrics;
  double tokens = 0, clip = 0, dual = 0, kl = 0, ent = 0, rsum = 0, rmin = 1e30, rmax = -1e30;
  for (size_t i = 0; i < c.adv.size(); ++i) {
    if (c.truncated[i]) continue;
    for (auto t = static_cast<size_t>(c.offsets[i]); t < static_cast<size_t>(c.offsets[i + 1]); ++t) {
      if (!c.mask[t]) continue;
      const double rho = std::exp(static_cast<double>(c.x[t]) - c.old[t]), a = c.adv[i];
      tokens += 1;
      clip += std::clamp(rho, 0.8, 1.2) * a < rho * a;                  // the clipped term is the min
      dual += a < 0 && -std::min(rho * a, std::clamp(rho, 0.8, 1.2) * a) > -3 * a;
      const double d = static_cast<double>(c.ref[t]) - c.x[t];
      kl += std::exp(d) - d - 1;
      ent += c.entropy[t];
      rsum += rho, rmin = std::min(rmin, rho), rmax = std::max(rmax, rho);
    }
  }
  EXPECT_DOUBLE_EQ(m.trained_tokens, tokens);
  EXPECT_NEAR(m.pg_clipfrac, clip / tokens, 1e-12);
  EXPECT_GT(m.pg_clipfrac, 0);
  EXPECT_NEAR(m.pg_clipfrac_lower, dual / tokens, 1e-12);
  EXPECT_GT(m.pg_clipfrac_lower, 0);
  EXPECT_NEAR(m.kl, kl / tokens, 1e-12);
  EXPECT_NEAR(m.entropy, ent / tokens, 1e-7);
  EXPECT_NEAR(m.is_ratio_mean, rsum / tokens, 1e-12);
  EXPECT_NEAR(m.is_ratio_min, rmin, 1e-12);
  EXPECT_NEAR(m.is_ratio_max, rmax, 1e-12);
  EXPECT_DOUBLE_EQ(m.completion_mean_length, 13.0 / 4);
  EXPECT_DOUBLE_EQ(m.completion_min_length, 1);
  EXPECT_DOUBLE_EQ(m.completion_max_length, 5);
  EXPECT_DOUBLE_EQ(m.completion_clipped_ratio, 0.25);
  // Without reference or entropies those metrics are NaN.
  Case bare = c;
  bare.ref.clear();
  bare.entropy.clear();
  const GrpoLossMetrics mb = grpo_loss_value(c.x, bare.inputs(false), {}).metrics;
  EXPECT_TRUE(std::isnan(mb.kl));
  EXPECT_TRUE(std::isnan(mb.entropy));
}

TEST(GrpoLoss, RejectsInconsistentInputsAndOptions) {
  Case c = hand_case();
  EXPECT_THROW(grpo_loss_value(c.x, c.inputs(false), {.epsilon_c = 1.0}), InvalidArgument);
  EXPECT_THROW(grpo_loss_value(c.x, c.inputs(false), {.aggregation = GrpoAggregation::kDrGrpo}), InvalidArgument);
  EXPECT_THROW(grpo_loss_value(c.x, c.inputs(false), {.epsilon_low = 1.0}), InvalidArgument);
  Case no_ref = c;
  no_ref.ref.clear();
  EXPECT_THROW(grpo_loss_value(c.x, no_ref.inputs(false), {.beta = 0.04}), InvalidArgument);
  EXPECT_NO_THROW(grpo_loss_value(c.x, no_ref.inputs(false), {.beta = 0}));
  Case short_old = c;
  short_old.old.pop_back();
  EXPECT_THROW(grpo_loss_value(c.x, short_old.inputs(false), {}), InvalidArgument);
  Case bad_offsets = c;
  bad_offsets.offsets.back() = 12;
  EXPECT_THROW(grpo_loss_value(c.x, bad_offsets.inputs(false), {}), InvalidArgument);
}

// ---- Mismatch correction against its definitions ----

TEST(GrpoMismatch, EveryModeIsItsDefinitionWithDiagnostics) {
  const std::vector<int64_t> offsets = {0, 3, 5, 9};
  const std::vector<float> old = {-1.0f, -0.5f, -2.0f, -0.3f, -1.2f, -0.8f, -0.1f, -3.0f, -0.6f};
  const std::vector<float> samp = {-1.1f, -0.2f, -3.5f, -0.3f, -1.0f, -0.7f, -0.4f, -2.0f, -0.9f};
  const std::vector<uint8_t> mask = {1, 1, 1, 1, 0, 1, 1, 1, 1};
  for (int mode = 0; mode < static_cast<int>(GrpoMismatchMode::kCount); ++mode)
    for (bool seq_mean : {false, true}) {
      const GrpoMismatchOptions o{.mode = static_cast<GrpoMismatchMode>(mode), .c_max = 2.0, .c_min = 0.5,
                                  .sequence_mean = seq_mean};
      const GrpoMismatch r = grpo_mismatch(old, samp, mask, offsets, o);
      const std::string what = std::string(grpo_mismatch_mode_name(o.mode)) + (seq_mean ? " mean" : "");
      const bool seq = o.mode == GrpoMismatchMode::kSequenceTruncate || o.mode == GrpoMismatchMode::kSequenceMask;
      const bool trunc = o.mode == GrpoMismatchMode::kTokenTruncate || o.mode == GrpoMismatchMode::kSequenceTruncate;
      std::vector<double> applied;  // per token or per sequence
      double clipped = 0;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        double s = 0, n = 0;
        for (auto t = static_cast<size_t>(offsets[i]); t < static_cast<size_t>(offsets[i + 1]); ++t)
          if (mask[t]) s += static_cast<double>(old[t]) - samp[t], n += 1;
        const double seq_w = std::exp(seq_mean ? s / n : s);
        for (auto t = static_cast<size_t>(offsets[i]); t < static_cast<size_t>(offsets[i + 1]); ++t) {
          const double raw = seq ? seq_w : std::exp(static_cast<double>(old[t]) - samp[t]);
          double want = o.mode == GrpoMismatchMode::kNone ? 1.0
                        : trunc                          ? std::min(raw, 2.0)
                        : raw < 0.5 || raw > 2.0         ? 0.0
                                                         : raw;
          if (!mask[t]) want = 0;
          EXPECT_NEAR(r.weights[t], want, 1e-6 * std::max(1.0, want)) << what << " token " << t;
          const bool first_of_seq = t == static_cast<size_t>(offsets[i]);
          if (mask[t] && (!seq || first_of_seq)) {
            applied.push_back(want);
            clipped += o.mode != GrpoMismatchMode::kNone && (raw > 2.0 || (!trunc && raw < 0.5));
          }
        }
      }
      double sum = 0;
      for (double w : applied) sum += w;
      EXPECT_NEAR(r.weight_mean, sum / static_cast<double>(applied.size()), 1e-9) << what;
      EXPECT_NEAR(r.weight_max, *std::max_element(applied.begin(), applied.end()), 1e-9) << what;
      EXPECT_NEAR(r.weight_min, *std::min_element(applied.begin(), applied.end()), 1e-9) << what;
      EXPECT_NEAR(r.frac_clipped, clipped / static_cast<double>(applied.size()), 1e-12) << what;
    }
  // Diagnostics over the trained tokens.
  const GrpoMismatch r = grpo_mismatch(old, samp, mask, offsets, {});
  double n = 0, d = 0, dmax = 0, pd = 0, mp = 0, mq = 0;
  for (size_t t = 0; t < old.size(); ++t)
    if (mask[t]) {
      const double diff = std::fabs(static_cast<double>(old[t]) - samp[t]);
      n += 1, d += diff, dmax = std::max(dmax, diff);
      pd += std::fabs(std::exp(static_cast<double>(old[t])) - std::exp(static_cast<double>(samp[t])));
      mp += std::exp(static_cast<double>(old[t])), mq += std::exp(static_cast<double>(samp[t]));
    }
  mp /= n, mq /= n;
  double cov = 0, vp = 0, vq = 0;
  for (size_t t = 0; t < old.size(); ++t)
    if (mask[t]) {
      const double p = std::exp(static_cast<double>(old[t])) - mp, q = std::exp(static_cast<double>(samp[t])) - mq;
      cov += p * q, vp += p * p, vq += q * q;
    }
  EXPECT_NEAR(r.logp_diff_mean, d / n, 1e-12);
  EXPECT_NEAR(r.logp_diff_max, dmax, 1e-12);
  EXPECT_NEAR(r.prob_diff_mean, pd / n, 1e-12);
  EXPECT_NEAR(r.probs_pearson_corr, cov / std::sqrt(vp * vq), 1e-9);
  EXPECT_THROW(grpo_mismatch(old, samp, mask, offsets, {.c_max = 1.0, .c_min = 2.0}), InvalidArgument);
}

// The fixture policy's gradient through the whole path (batch packing, output rows, fused log-probs, the loss
// node) matches central differences along a random adapter direction for off-default options (f32 forwards:
// 2e-2 relative, as dpo_loss_test).
TEST(GrpoLoss, ModelGradientMatchesFiniteDifferencesForVariants) {
  Fixture f = grpo_fixture();
  testing::FixturePolicy p = testing::fixture_policy();
  const Tensor targets = Tensor::from_data_i32({f.batch.n_tokens()}, f.batch.targets);
  std::vector<float> ref_lp;
  {
    NoGradGuard ng;
    ref_lp = p.model->token_logprobs(f.batch.forward_batch(), targets, {.lora = false}).logprobs.to_vector();
  }
  const std::vector<uint8_t> mask(f.old_logps.size(), 1);
  const std::vector<double> adv = {1.2, -0.7, 0.4, -0.9};
  const GrpoLossInputs in{.offsets = f.batch.offsets, .old_logps = f.old_logps, .ref_logps = ref_lp, .mask = mask,
                          .advantages = adv};
  for (const GrpoLossOptions& o :
       {GrpoLossOptions{.epsilon_high = 0.28, .beta = 0.2, .kl = GrpoKl::kK2, .aggregation = GrpoAggregation::kBnpo},
        GrpoLossOptions{.epsilon_low = 0.5, .epsilon_high = 0.5, .beta = 0.1, .kl = GrpoKl::kK1,
                        .aggregation = GrpoAggregation::kSeqMeanTokenSum, .ratio_level = GrpoRatioLevel::kSequence}}) {
    const auto loss_now = [&] {
      const Tensor lp = p.model->token_logprobs(f.batch.forward_batch(), targets).logprobs;
      return grpo_loss(lp, in, o);
    };
    backward(loss_now());
    const auto [analytic, numeric] = testing::directional_derivative(
        *p.lora, [&] { return static_cast<double>(loss_now().item()); }, 2e-3);
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::fabs(numeric) + 1e-4) << describe(o);
  }
}

}  // namespace
}  // namespace lathe::posttrain
