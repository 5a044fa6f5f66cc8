// KTO (dpo.loss_type kto, specs/posttrain.md §4) on the fixture Llama + PEFT adapter (tests/fixtures/posttrain):
// the fixture's preference pairs unpaired (chosen: desirable, rejected: undesirable). The example loss and its
// derivative against the spec formula written out here; the model loss, its metrics and its gradient (z0 a
// stop-gradient) against the formula on log-probs computed here in forwards of their own; the batch layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/posttrain/dpo_objective.h"
#include "lathe/posttrain/test_policy.h"

namespace lathe::posttrain {
namespace {

using nlohmann::json;
using testing::metric;

double sig(double x) { return 1 / (1 + std::exp(-x)); }

// The spec's per-example KTO loss, z0 given.
double spec_kto(const DpoLossConfig& c, double logp, double ref_logp, double z0, bool desirable) {
  const double r = logp - ref_logp;
  return desirable ? c.desirable_weight * (1 - sig(c.beta * (r - z0))) : c.undesirable_weight * (1 - sig(c.beta * (z0 - r)));
}

// The fixture's pairs as unpaired examples: chosen_0 (desirable), rejected_0 (undesirable), chosen_1, ...
UnpairedExamples fixture_examples() {
  UnpairedExamples d;
  const json ref = testing::posttrain_reference();  // kept alive: the loop walks a part of it
  for (const auto& p : ref.at("dpo").at("pairs")) {
    d.examples.push_back(testing::prompt_answer_sequence(p["prompt"], p["chosen"]));
    d.desirable.push_back(1);
    d.examples.push_back(testing::prompt_answer_sequence(p["prompt"], p["rejected"]));
    d.desirable.push_back(0);
  }
  return d;
}

std::vector<int64_t> all_ids(const UnpairedExamples& d) {
  std::vector<int64_t> ids(d.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

TEST(KtoLoss, ExampleLossIsTheFormulaWithFiniteDifferenceDerivative) {
  for (const DpoLossConfig c : {DpoLossConfig{.type = DpoLossType::kKto, .beta = 0.1},
                                DpoLossConfig{.type = DpoLossType::kKto, .beta = 0.7, .desirable_weight = 1.3,
                                              .undesirable_weight = 0.6}}) {
    for (const double logp : {-31.5, -4.25, -0.5})
      for (const double z0 : {0.0, 0.8})
        for (const bool d : {true, false}) {
          const double ref = -5.0;
          const KtoExampleLoss l = kto_example_loss(c, logp, ref, z0, d);
          EXPECT_NEAR(l.loss, spec_kto(c, logp, ref, z0, d), 1e-14);
          EXPECT_NEAR(l.reward, c.beta * (logp - ref), 1e-14);
          const double h = 1e-5;  // central differences: O(h²) truncation, ~1e-11 rounding
          EXPECT_NEAR(l.d_logp, (spec_kto(c, logp + h, ref, z0, d) - spec_kto(c, logp - h, ref, z0, d)) / (2 * h), 1e-8)
              << logp << " " << z0 << " " << d;
        }
  }
}

// KL sequence j: example j's prompt with the answer of example (j − 1) mod k (TRL's shift by one).
TEST(KtoLoss, BatchPairsEachPromptWithThePreviousExamplesAnswer) {
  const UnpairedExamples d = fixture_examples();
  ASSERT_EQ(d.size(), 4u);  // the fixture's two pairs
  const std::vector<int64_t> ids = {3, 0, 2};
  const DpoBatch b = make_kto_batch(d, ids, 0);
  ASSERT_EQ(b.n_pairs(), 3);
  EXPECT_EQ(b.kl_answer_ids, (std::vector<int64_t>{2, 3, 0}));
  EXPECT_EQ(b.desirable, (std::vector<uint8_t>{d.desirable[3], d.desirable[0], d.desirable[2]}));
  for (size_t j = 0; j < ids.size(); ++j) {
    const TokenizedExample& x = d.examples[static_cast<size_t>(ids[j])];
    const TokenizedExample& y = d.examples[static_cast<size_t>(b.kl_answer_ids[j])];
    const auto prompt_len = [](const TokenizedExample& e) {
      return static_cast<size_t>(std::find(e.supervised.begin() + 1, e.supervised.end(), 1) - e.supervised.begin());
    };
    const size_t px = prompt_len(x), py = prompt_len(y);
    std::vector<int32_t> want(x.ids.begin(), x.ids.begin() + static_cast<std::ptrdiff_t>(px));
    want.insert(want.end(), y.ids.begin() + static_cast<std::ptrdiff_t>(py), y.ids.end());
    std::vector<int32_t> got;
    for (size_t i = 0; i < b.tokens.size(); ++i)
      if (b.seq[i] == static_cast<int32_t>(ids.size() + j)) got.push_back(b.tokens[i]);
    EXPECT_EQ(got, want) << j;
    EXPECT_EQ(b.completion_len[ids.size() + j], static_cast<int64_t>(y.size() - py)) << j;
  }
  const std::vector<int64_t> one = {2};
  EXPECT_THROW(make_kto_batch(d, one, 0), InvalidArgument);
  EXPECT_EQ(kl_sequence(d.examples[0], d.examples[1], 5).size(), 5u);  // max_length cuts the end
}

// The model loss: the mean of the formula over the examples with z0 = max(0, mean of the KL sequences'
// log π_θ − log π_ref), all computed here in forwards of their own; its gradient against central differences
// of that formula with z0 held fixed (a stop-gradient), along a random direction of the adapter (f32
// forwards: 2e-2 relative, as dpo_loss_test).
TEST(KtoLoss, ModelLossMatchesTheFormulaAndFiniteDifferencesWithZ0Fixed) {
  const UnpairedExamples d = fixture_examples();
  const std::vector<int64_t> ids = all_ids(d);
  const DpoBatch batch = make_kto_batch(d, ids, 0);
  const auto k = static_cast<size_t>(batch.n_pairs());
  testing::FixturePolicy p = testing::fixture_policy();
  // Each example with its KL sequence, as a pair; log-probs under the reference (adapter off) and the policy.
  std::vector<PreferencePair> seqs;
  for (size_t j = 0; j < k; ++j)
    seqs.emplace_back(d.examples[j], kl_sequence(d.examples[j], d.examples[static_cast<size_t>(batch.kl_answer_ids[j])], 0));
  const auto logps_of = [&](bool lora) {
    RefLogps r;
    for (const PreferencePair& s : seqs) {
      const auto [x, kl] = pair_reference_logps(*p.model, s, {.lora = lora});
      r.chosen.push_back(x);
      r.rejected.push_back(kl);
    }
    return r;
  };
  const RefLogps ref = logps_of(false);
  for (const double beta : {0.1, 0.5}) {
    for (const double w_u : {1.0, 1.7}) {
      const DpoLossConfig c{.type = DpoLossType::kKto, .beta = beta, .undesirable_weight = w_u};
      const RefLogps pol = logps_of(true);
      double kl = 0;
      for (size_t j = 0; j < k; ++j) kl += (pol.rejected[j] - ref.rejected[j]) / static_cast<double>(k);
      const double z0 = std::max(0.0, kl);
      const auto formula = [&](const RefLogps& at) {
        double l = 0;
        for (size_t j = 0; j < k; ++j) l += spec_kto(c, at.chosen[j], ref.chosen[j], z0, d.desirable[j] != 0) / static_cast<double>(k);
        return l;
      };
      const train::ObjectiveResult r = kto_loss(*p.model, batch, ref, c);
      const double want = formula(pol);
      EXPECT_NEAR(r.loss.item(), want, 1e-5 * std::fabs(want)) << beta;
      EXPECT_NEAR(metric(r, "kl"), z0, 1e-5 * std::fabs(kl) + 1e-9);
      double chosen = 0, rejected = 0;
      for (size_t j = 0; j < k; ++j)
        (d.desirable[j] ? chosen : rejected) += beta * (pol.chosen[j] - ref.chosen[j]) / static_cast<double>(k / 2);
      EXPECT_NEAR(metric(r, "rewards/chosen"), chosen, 1e-5 * std::fabs(chosen) + 1e-7);
      EXPECT_NEAR(metric(r, "rewards/rejected"), rejected, 1e-5 * std::fabs(rejected) + 1e-7);
      EXPECT_NEAR(metric(r, "rewards/margins"), chosen - rejected, 1e-5 * std::fabs(chosen - rejected) + 1e-7);
      ASSERT_EQ(r.metric_weights.size(), r.metrics.size());
      EXPECT_EQ(r.metric_weights[0], static_cast<double>(k / 2));  // rewards/chosen: the desirable count
      backward(r.loss);
      const auto [analytic, numeric] = testing::directional_derivative(*p.lora, [&] { return formula(logps_of(true)); }, 2e-3);
      EXPECT_NEAR(analytic, numeric, 2e-2 * std::fabs(numeric) + 1e-4) << beta << " " << w_u;
      EXPECT_GT(std::fabs(numeric), 1e-4);  // a real check, not 0 ≈ 0
    }
  }
}

// z0 is clamped at 0: a reference far above the policy on the KL sequences gives z0 = 0 and the loss of
// z0 = 0; far below it gives their mean.
TEST(KtoLoss, Z0IsTheClampedMeanOfTheKlSequences) {
  const UnpairedExamples d = fixture_examples();
  const DpoBatch batch = make_kto_batch(d, all_ids(d), 0);
  testing::FixturePolicy p = testing::fixture_policy();
  NoGradGuard ng;
  const DpoLossConfig c{.type = DpoLossType::kKto, .beta = 0.1};
  const auto k = static_cast<size_t>(batch.n_pairs());
  RefLogps high{std::vector<double>(k, -1.0), std::vector<double>(k, 0.0)};  // log π_θ − 0 < 0 everywhere
  EXPECT_EQ(metric(kto_loss(*p.model, batch, high, c), "kl"), 0.0);
  RefLogps low{std::vector<double>(k, -1.0), std::vector<double>(k, -1e4)};
  const double z0 = metric(kto_loss(*p.model, batch, low, c), "kl");
  EXPECT_GT(z0, 1e3);
  EXPECT_LT(z0, 1e4);
}

}  // namespace
}  // namespace lathe::posttrain
