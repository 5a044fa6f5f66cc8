// The SFT loss on the fixture Llama: parity with the TRL-style reference (posttrain/reference.json "sft":
// loss and every gradient), a packed row equal to its examples run one by one (attention and targets stay
// inside each example), the step-global normalisation over micro-batches, and DFT's stop-gradient weights.
#include "lathe/posttrain/sft_objective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "lathe/autograd/node.h"
#include "lathe/base/rng.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/test_paths.h"
#include "lathe/ops/elementwise.h"
#include "lathe/posttrain/test_grads.h"

namespace lathe::posttrain {
namespace {

using testing::Grads;
using testing::grad_rel_diff;
using testing::take_grads;

std::unique_ptr<Model> llama() {
  auto m = Model::load(testing::fixtures_root() + "/models/llama", {.force_f32 = true});
  m->set_requires_grad(true);
  return m;
}

SftBatch batch_of(std::initializer_list<const TokenizedExample*> exs, double step_targets = 0) {
  SftBatch b;
  for (const auto* e : exs) b.append(example_row(*e));
  b.step_targets = step_targets;
  return b;
}

// Random ids of the fixture's vocabulary with a random mask (at least one target).
TokenizedExample random_example(int n, uint64_t seed, int64_t vocab) {
  CounterRng rng{.key = seed};
  TokenizedExample e;
  for (int i = 0; i < n; ++i) {
    e.ids.push_back(static_cast<int32_t>(rng.next_below(static_cast<uint64_t>(vocab))));
    e.supervised.push_back(i > 0 && (i == n - 1 || rng.next_below(3) > 0) ? 1 : 0);
  }
  return e;
}

// Tolerances as tests/models/parity_test.cc: loss 1e-5 relative, gradients 1e-3 relative (norm). Two lathe
// runs of the same sums in another order: 1e-4 (f32 rounding over a few hundred terms).
TEST(SftLoss, PromptCompletionMatchesReference) {
  std::ifstream in(testing::fixtures_root() + "/posttrain/reference.json");
  ASSERT_TRUE(in);
  const nlohmann::json ref = nlohmann::json::parse(in)["sft"];
  SafetensorsFile tensors = SafetensorsFile::open(testing::fixtures_root() + "/posttrain/reference.safetensors");
  TokenizedExample ex;
  for (const auto& t : ref["prompt"]) {
    ex.ids.push_back(t.get<int32_t>());
    ex.supervised.push_back(0);
  }
  for (const auto& t : ref["completion"]) {
    ex.ids.push_back(t.get<int32_t>());
    ex.supervised.push_back(1);
  }
  auto m = llama();
  const Tensor loss = sft_loss(*m, batch_of({&ex}), SftLoss::kNll, 1.0);
  const double want = ref["loss"].get<double>();
  EXPECT_NEAR(loss.item(), want, 1e-5 * std::fabs(want));
  backward(loss);
  int checked = 0;
  for (auto& [name, g] : m->gradients_by_name()) {
    const Tensor w = tensors.tensor("sft.grad." + name);
    ASSERT_EQ(g.shape(), w.shape()) << name;
    Grads a{{name, g.to_vector()}}, b{{name, w.to_vector()}};
    EXPECT_LE(grad_rel_diff(a, b), 1e-3) << name;
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(m->gradients_by_name().size()));
  EXPECT_GT(checked, 0);
}

TEST(SftLoss, PackedRowEqualsItsExamplesRunSeparately) {
  auto m = llama();
  const int64_t V = m->config().vocab_size;
  const TokenizedExample a = random_example(9, 1, V), b = random_example(5, 2, V), c = random_example(12, 3, V);
  const std::vector<TokenizedExample> all = {a, b, c};
  const std::vector<SftRow> rows = build_rows(all, Packing::kBfd, 32);
  ASSERT_EQ(rows.size(), 1u);  // one row of 26 tokens, three sequences
  SftBatch packed;
  packed.append(rows[0]);
  const double n = static_cast<double>(packed.n_targets);
  const Tensor lp = sft_loss(*m, packed, SftLoss::kNll, 1.0);
  backward(lp);
  const Grads g_packed = take_grads(*m);
  double sum = 0;
  for (const auto* e : {&a, &b, &c}) {
    const Tensor l = sft_loss(*m, batch_of({e}, n), SftLoss::kNll, 1.0);  // its token sum / all targets
    sum += l.item();
    backward(l);
  }
  const Grads g_separate = take_grads(*m);
  EXPECT_NEAR(lp.item(), sum, 1e-5 * std::fabs(sum));
  EXPECT_LE(grad_rel_diff(g_packed, g_separate), 1e-4);
}

TEST(SftLoss, MicroBatchesNormaliseByTheWholeStepsTokens) {
  auto m = llama();
  const int64_t V = m->config().vocab_size;
  const TokenizedExample a = random_example(6, 4, V), b = random_example(11, 5, V), c = random_example(10, 6, V);
  // One batch of all three.
  const Tensor whole = sft_loss(*m, batch_of({&a, &b, &c}), SftLoss::kNll, 1.0);
  backward(whole);
  const Grads g_whole = take_grads(*m);
  // Two micro-batches ({a}, {b, c}: different trained counts), as the loop runs them: each loss scaled by
  // grad_accum = 2 over the step's count, backward(loss / 2), the loop's loss the mean of the two.
  const double step = static_cast<double>(a.n_targets() + b.n_targets() + c.n_targets());
  ASSERT_NE(a.n_targets(), b.n_targets() + c.n_targets());
  double mean = 0;
  for (const SftBatch& mb : {batch_of({&a}, step), batch_of({&b, &c}, step)}) {
    const Tensor l = sft_loss(*m, mb, SftLoss::kNll, 2.0);
    mean += l.item() / 2;
    backward(scale(l, 0.5f));
  }
  const Grads g_micro = take_grads(*m);
  EXPECT_NEAR(mean, whole.item(), 1e-5 * std::fabs(whole.item()));
  EXPECT_LE(grad_rel_diff(g_micro, g_whole), 1e-4);
  // The per-micro-batch mean (each micro-batch its own denominator) is a different gradient.
  for (const SftBatch& mb : {batch_of({&a}), batch_of({&b, &c})}) backward(scale(sft_loss(*m, mb, SftLoss::kNll, 1.0), 0.5f));
  EXPECT_GT(grad_rel_diff(take_grads(*m), g_whole), 1e-2);
}

TEST(SftLoss, DftWeightsEachTokensGradientByItsStoppedProbability) {
  auto m = llama();
  const TokenizedExample ex = random_example(8, 7, m->config().vocab_size);
  const double n = static_cast<double>(ex.n_targets());
  const Tensor dft = sft_loss(*m, batch_of({&ex}), SftLoss::kDft, 1.0);
  backward(dft);
  const Grads g_dft = take_grads(*m);
  // Σ_t p_t · ∇(−log p_t) / n, one target at a time through the NLL loss.
  Grads want;
  double value = 0;
  for (size_t t = 1; t < ex.size(); ++t) {
    if (!ex.supervised[t]) continue;
    TokenizedExample one = ex;
    std::fill(one.supervised.begin(), one.supervised.end(), 0);
    one.supervised[t] = 1;
    const Tensor l = sft_loss(*m, batch_of({&one}, n), SftLoss::kNll, 1.0);  // −log p_t / n
    const double p = std::exp(-l.item() * n);
    value += -p * std::log(p) / n;
    backward(l);
    for (auto& [name, g] : take_grads(*m)) {
      std::vector<float>& w = want[name];
      w.resize(g.size());
      for (size_t i = 0; i < g.size(); ++i) w[i] += static_cast<float>(p * g[i]);
    }
  }
  EXPECT_NEAR(dft.item(), value, 1e-5 * std::fabs(value));
  EXPECT_LE(grad_rel_diff(g_dft, want), 1e-4);
}

}  // namespace
}  // namespace lathe::posttrain
