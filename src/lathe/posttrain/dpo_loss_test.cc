// The DPO family on the fixture Llama + PEFT adapter (tests/fixtures/posttrain: reference.json "dpo", its
// pairs, reference log-probs, loss and the LoRA gradients 'dpo.grad.<name>'): parity with TRL; every loss type
// against its spec formula written out here from the log-probs; the pair derivatives and the model gradient
// of each type against finite differences.
#include "lathe/posttrain/dpo_objective.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "lathe/autograd/node.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/posttrain/test_policy.h"

namespace lathe::posttrain {
namespace {

using nlohmann::json;

using testing::posttrain_reference;
using testing::metric;
json dpo_reference() { return posttrain_reference().at("dpo"); }

std::vector<PreferencePair> fixture_pairs(const json& ref) {
  std::vector<PreferencePair> out;
  for (const auto& p : ref.at("pairs"))
    out.emplace_back(testing::prompt_answer_sequence(p["prompt"], p["chosen"]),
                     testing::prompt_answer_sequence(p["prompt"], p["rejected"]));
  return out;
}

DpoBatch batch_of(const std::vector<PreferencePair>& pairs) {
  std::vector<const PreferencePair*> ptrs;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < pairs.size(); ++i) {
    ptrs.push_back(&pairs[i]);
    ids.push_back(static_cast<int64_t>(i));
  }
  return make_dpo_batch(ptrs, ids);
}

using Policy = testing::FixturePolicy;
using testing::fixture_policy;

RefLogps reference_of(const Model& m, const std::vector<PreferencePair>& pairs) {
  RefLogps r;
  for (const auto& p : pairs) {
    const auto [c, rj] = pair_reference_logps(m, p, {.lora = false});
    r.chosen.push_back(c);
    r.rejected.push_back(rj);
  }
  return r;
}

// Tolerances as tests/models/parity_test.cc: loss and log-probs 1e-5 relative, gradients 1e-3 relative (norm).
TEST(DpoLoss, MatchesTheTrlReferenceLossLogProbsAndLoraGradients) {
  const json ref = dpo_reference();
  const std::vector<PreferencePair> pairs = fixture_pairs(ref);
  Policy p = fixture_policy();
  const RefLogps rl = reference_of(*p.model, pairs);  // the base: the adapter off
  for (size_t i = 0; i < pairs.size(); ++i) {
    const json& want = ref["pairs"][i];
    EXPECT_NEAR(rl.chosen[i], want["ref_chosen_logp"].get<double>(), 1e-5 * std::fabs(want["ref_chosen_logp"].get<double>()));
    EXPECT_NEAR(rl.rejected[i], want["ref_rejected_logp"].get<double>(),
                1e-5 * std::fabs(want["ref_rejected_logp"].get<double>()));
    const RefLogps pol = reference_of(*p.model, {pairs[i]});  // not the policy: check the adapter changes it
    EXPECT_GT(std::fabs(pol.chosen[0] - want["policy_chosen_logp"].get<double>()), 1e-3);
  }
  const DpoLossConfig c{.beta = ref["beta"].get<double>()};
  const train::ObjectiveResult r = dpo_loss(*p.model, batch_of(pairs), rl, c);
  const double want = ref["loss"].get<double>();
  EXPECT_NEAR(r.loss.item(), want, 1e-5 * std::fabs(want));
  // logps/chosen: the mean of the policy's (base + adapter) sequence log-probs.
  double mean_c = 0, mean_r = 0;
  for (const auto& w : ref["pairs"]) {
    mean_c += w["policy_chosen_logp"].get<double>() / static_cast<double>(pairs.size());
    mean_r += w["policy_rejected_logp"].get<double>() / static_cast<double>(pairs.size());
  }
  EXPECT_NEAR(metric(r, "logps/chosen"), mean_c, 1e-5 * std::fabs(mean_c));
  EXPECT_NEAR(metric(r, "logps/rejected"), mean_r, 1e-5 * std::fabs(mean_r));
  backward(r.loss);
  const SafetensorsFile tensors = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
  int checked = 0;
  p.lora->for_each_param([&](const std::string& name, Tensor& t, int) {
    // PEFT's trainable names carry the adapter name: ...lora_A.weight -> ...lora_A.default.weight.
    std::string peft = name;
    peft.insert(peft.rfind(".weight"), ".default");
    const Tensor w = tensors.tensor("dpo.grad." + peft).to(DType::kF32);
    ASSERT_TRUE(t.grad().defined()) << name;
    ASSERT_EQ(t.grad().shape(), w.shape()) << name;
    const std::vector<float> a = t.grad().to_vector(), b = w.to_vector();
    double d2 = 0, r2 = 0;
    for (size_t i = 0; i < b.size(); ++i) {
      d2 += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
      r2 += static_cast<double>(b[i]) * b[i];
    }
    EXPECT_LE(std::sqrt(d2), 1e-3 * std::sqrt(r2) + 1e-9) << name;
    ++checked;
  });
  int in_file = 0;  // every 'dpo.grad.' tensor has its adapter parameter
  for (const SafetensorsEntry& e : tensors.entries()) in_file += e.name.rfind("dpo.grad.", 0) == 0;
  EXPECT_EQ(checked, in_file);
  EXPECT_GT(checked, 0);
}

// The spec's formulas (specs/posttrain.md §4), written out independently of dpo_loss.cc.
double sig(double x) { return 1 / (1 + std::exp(-x)); }
double spec_loss(const DpoLossConfig& c, const PairLogps& p) {
  const double b = c.beta, e = c.label_smoothing;
  const double d = (p.chosen - p.ref_chosen) - (p.rejected - p.ref_rejected);
  switch (c.type) {
    case DpoLossType::kSigmoid: return -(1 - e) * std::log(sig(b * d)) - e * std::log(sig(-b * d));
    case DpoLossType::kRobust: return (-(1 - e) * std::log(sig(b * d)) + e * std::log(sig(-b * d))) / (1 - 2 * e);
    case DpoLossType::kHinge: return std::max(0.0, 1 - b * d);
    case DpoLossType::kIpo: return std::pow(d - 1 / (2 * b), 2);
    case DpoLossType::kSimpo: {
      const double z = b * p.chosen - b * p.rejected - c.simpo_gamma;
      return -(1 - e) * std::log(sig(z)) - e * std::log(sig(-z));
    }
    case DpoLossType::kOrpo: {
      const auto odds = [](double lp) { return lp - std::log(1 - std::exp(lp)); };
      return -b * std::log(sig(odds(p.chosen) - odds(p.rejected)));
    }
    default: return NAN;
  }
}

std::vector<DpoLossConfig> all_configs(double beta) {
  return {{.type = DpoLossType::kSigmoid, .beta = beta},
          {.type = DpoLossType::kSigmoid, .beta = beta, .label_smoothing = 0.2},
          {.type = DpoLossType::kRobust, .beta = beta, .label_smoothing = 0.2},
          {.type = DpoLossType::kHinge, .beta = beta},
          {.type = DpoLossType::kIpo, .beta = beta},
          {.type = DpoLossType::kSimpo, .beta = beta, .simpo_gamma = 0.5},
          {.type = DpoLossType::kSimpo, .beta = beta, .label_smoothing = 0.1, .simpo_gamma = 0.3},
          {.type = DpoLossType::kOrpo, .beta = beta}};
}

// Each pair loss and its derivatives: the formula, and central differences of it.
TEST(DpoLoss, EveryTypeIsItsFormulaWithFiniteDifferenceDerivatives) {
  const json ref = dpo_reference();
  for (const DpoLossConfig& c : all_configs(ref["beta"].get<double>())) {
    for (const auto& w : ref["pairs"]) {
      PairLogps p{w["policy_chosen_logp"].get<double>(), w["policy_rejected_logp"].get<double>(),
                  w["ref_chosen_logp"].get<double>(), w["ref_rejected_logp"].get<double>()};
      if (loss_length_normalised(c.type)) {  // per-token means, as the objective passes them
        const double nc = static_cast<double>(w["chosen"].size()), nr = static_cast<double>(w["rejected"].size());
        p = {p.chosen / nc, p.rejected / nr, p.ref_chosen / nc, p.ref_rejected / nr};
      }
      if (!loss_needs_reference(c.type)) p.ref_chosen = p.ref_rejected = 0;
      const PairLoss l = dpo_pair_loss(c, p);
      const std::string what = std::string(dpo_loss_name(c.type)) + " eps " + std::to_string(c.label_smoothing);
      EXPECT_NEAR(l.loss, spec_loss(c, p), 1e-12 + 1e-10 * std::fabs(l.loss)) << what;
      const double h = 1e-5;
      PairLogps up = p, dn = p;
      up.chosen += h;
      dn.chosen -= h;
      EXPECT_NEAR(l.d_chosen, (spec_loss(c, up) - spec_loss(c, dn)) / (2 * h), 1e-6) << what;
      up = dn = p;
      up.rejected += h;
      dn.rejected -= h;
      EXPECT_NEAR(l.d_rejected, (spec_loss(c, up) - spec_loss(c, dn)) / (2 * h), 1e-6) << what;
    }
  }
}

// dpo_loss on the model: its value is the mean of the formula over the pairs (plus RPO's NLL), its metrics
// are TRL's, and its gradient matches central differences of the loss along a random direction of the
// adapter (f32 forwards: 2e-2 relative).
TEST(DpoLoss, ModelLossOfEveryTypeMatchesFormulaAndFiniteDifferences) {
  const json ref = dpo_reference();
  const std::vector<PreferencePair> pairs = fixture_pairs(ref);
  const DpoBatch batch = batch_of(pairs);
  Policy p = fixture_policy();
  const RefLogps rl = reference_of(*p.model, pairs);
  std::vector<DpoLossConfig> configs = all_configs(0.5);  // a larger beta: gradients well above f32 noise
  configs.push_back({.type = DpoLossType::kSigmoid, .beta = 0.5, .rpo_alpha = 0.7});
  // The policy's sequence log-probs, computed apart (no grad).
  std::vector<double> pc, pr;
  {
    NoGradGuard ng;
    for (const auto& pair : pairs) {
      const auto [c, r] = pair_reference_logps(*p.model, pair, {});  // adapter on: the policy
      pc.push_back(c);
      pr.push_back(r);
    }
  }
  for (const DpoLossConfig& c : configs) {
    const std::string what = std::string(dpo_loss_name(c.type)) + " eps " + std::to_string(c.label_smoothing) +
                             " rpo " + std::to_string(c.rpo_alpha);
    const train::ObjectiveResult r = dpo_loss(*p.model, batch, rl, c);
    double want = 0, margin = 0;
    for (size_t j = 0; j < pairs.size(); ++j) {
      const double nc = static_cast<double>(batch.completion_len[j]);
      const double nr = static_cast<double>(batch.completion_len[pairs.size() + j]);
      const bool norm = loss_length_normalised(c.type), refd = loss_needs_reference(c.type);
      const PairLogps lp{norm ? pc[j] / nc : pc[j], norm ? pr[j] / nr : pr[j],
                         refd ? (norm ? rl.chosen[j] / nc : rl.chosen[j]) : 0,
                         refd ? (norm ? rl.rejected[j] / nr : rl.rejected[j]) : 0};
      want += spec_loss(c, lp) / static_cast<double>(pairs.size());
      margin += c.beta * ((lp.chosen - lp.ref_chosen) - (lp.rejected - lp.ref_rejected)) / static_cast<double>(pairs.size());
    }
    if (c.rpo_alpha > 0) {  // α · the chosen answers' token-mean NLL
      double s = 0, n = 0;
      for (size_t j = 0; j < pairs.size(); ++j) {
        s -= pc[j];
        n += static_cast<double>(batch.completion_len[j]);
      }
      want += c.rpo_alpha * s / n;
    }
    if (c.type != DpoLossType::kOrpo) {  // ORPO adds the prompt + chosen NLL: checked by the differences below
      EXPECT_NEAR(r.loss.item(), want, 1e-5 * std::fabs(want)) << what;
      EXPECT_NEAR(metric(r, "rewards/margins"), margin, 1e-5 * std::fabs(margin) + 1e-7) << what;
    }
    backward(r.loss);
    // Central differences along a random direction d of all adapter tensors: (L(θ+hd) − L(θ−hd)) / 2h = ∇L·d.
    const auto [analytic, numeric] = testing::directional_derivative(
        *p.lora, [&] { return static_cast<double>(dpo_loss(*p.model, batch, rl, c).loss.item()); }, 2e-3);
    EXPECT_NEAR(analytic, numeric, 2e-2 * std::fabs(numeric) + 1e-4) << what;
  }
}

// A reference-free loss is the loss with zero reference log-probs; the pair order inside a batch does not
// change the per-pair values (each sequence has its own attention and positions).
TEST(DpoLoss, ReferenceFreeIsZeroReferenceAndBatchOrderDoesNotMatter) {
  const json ref = dpo_reference();
  std::vector<PreferencePair> pairs = fixture_pairs(ref);
  Policy p = fixture_policy();
  NoGradGuard ng;
  const DpoLossConfig c{.beta = 0.1};
  const RefLogps zero{std::vector<double>(pairs.size(), 0.0), std::vector<double>(pairs.size(), 0.0)};
  const double free = dpo_loss(*p.model, batch_of(pairs), zero, c).loss.item();
  double want = 0;
  for (const auto& w : ref["pairs"])
    want += -std::log(sig(c.beta * (w["policy_chosen_logp"].get<double>() - w["policy_rejected_logp"].get<double>()))) /
            static_cast<double>(pairs.size());
  EXPECT_NEAR(free, want, 1e-5 * std::fabs(want));
  const RefLogps rl = reference_of(*p.model, pairs);
  const double fwd = dpo_loss(*p.model, batch_of(pairs), rl, c).loss.item();
  std::reverse(pairs.begin(), pairs.end());
  const RefLogps rev{{rl.chosen.rbegin(), rl.chosen.rend()}, {rl.rejected.rbegin(), rl.rejected.rend()}};
  EXPECT_NEAR(dpo_loss(*p.model, batch_of(pairs), rev, c).loss.item(), fwd, 1e-6 * std::fabs(fwd));
}

}  // namespace
}  // namespace lathe::posttrain
