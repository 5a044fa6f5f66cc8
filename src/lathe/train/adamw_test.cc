#include "lathe/train/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/rng.h"

namespace lathe::train {
namespace {

// The spec's update in double precision, one element at a time.
struct RefAdamW {
  double m = 0, v = 0;
  void step(double& theta, double g, int t, double lr, const AdamWConfig& c, bool decay) {
    m = c.beta1 * m + (1 - c.beta1) * g;
    v = c.beta2 * v + (1 - c.beta2) * g * g;
    const double mh = m / (1 - std::pow(c.beta1, t)), vh = v / (1 - std::pow(c.beta2, t));
    theta -= lr * (mh / (std::sqrt(vh) + c.eps) + (decay ? c.weight_decay : 0.0) * theta);
  }
};

TEST(AdamW, MatchesTheFormulaOverSeveralStepsWithDecayMaskAndScale) {
  const AdamWConfig cfg{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  CounterRng rng{42, 0};
  const int64_t n = 70000;  // more than one parallel chunk
  std::vector<OptimParam> params = {{"w", Tensor::empty({n / 100, 100}), true}, {"norm", Tensor::empty({37}), false}};
  for (auto& p : params)
    for (int64_t i = 0; i < p.value.numel(); ++i) p.value.data<float>()[i] = rng.next_normal();
  std::vector<std::vector<double>> theta(2);
  std::vector<std::vector<RefAdamW>> ref(2);
  for (int k = 0; k < 2; ++k) {
    theta[k].assign(params[k].value.data<float>(), params[k].value.data<float>() + params[k].value.numel());
    ref[k].resize(theta[k].size());
  }
  for (auto& p : params) p.value.set_requires_grad(true);
  AdamW opt(params, cfg);
  ThreadPool pool(2);
  for (int t = 1; t <= 5; ++t) {
    const double lr = 1e-2 * t;
    const float scale = 0.5f;
    for (int k = 0; k < 2; ++k) {
      Tensor g = Tensor::empty(params[k].value.shape());
      for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = rng.next_normal() * (i % 3 ? 1.f : 1e-3f);
      params[k].value.impl()->grad = g;
      for (size_t i = 0; i < theta[k].size(); ++i)
        ref[k][i].step(theta[k][i], double(g.data<float>()[i]) * scale, t, lr, cfg, params[k].decay);
    }
    opt.step(lr, scale, pool);
  }
  for (int k = 0; k < 2; ++k) {
    double max_err = 0;
    for (size_t i = 0; i < theta[k].size(); ++i)
      max_err = std::max(max_err, std::abs(double(params[k].value.data<float>()[i]) - theta[k][i]));
    EXPECT_LT(max_err, 1e-5) << params[k].name;
  }
  EXPECT_EQ(opt.steps_done(), 5);
}

TEST(AdamW, GlobalNormIsIndependentOfThreads) {
  std::vector<OptimParam> params = {{"a", Tensor::empty({300000}), true}, {"b", Tensor::empty({3}), false}};
  CounterRng rng{1, 0};
  double ref = 0;
  for (auto& p : params) {
    Tensor g = Tensor::empty(p.value.shape());
    for (int64_t i = 0; i < g.numel(); ++i) {
      g.data<float>()[i] = rng.next_normal();
      ref += double(g.data<float>()[i]) * g.data<float>()[i];
    }
    p.value.impl()->grad = g;
  }
  ThreadPool one(1), two(2);
  const double n1 = global_grad_norm(params, one), n2 = global_grad_norm(params, two);
  EXPECT_EQ(n1, n2);
  EXPECT_NEAR(n1, std::sqrt(ref), 1e-9 * std::sqrt(ref));
}

// ZeRO-1: optimizers owning adjacent ranges (cutting tensors, one range empty) together take the whole
// optimizer's step, bit for bit: the update is elementwise.
TEST(AdamW, OwnedRangesTogetherEqualTheWholeStep) {
  const AdamWConfig cfg{.beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  const std::vector<Shape> shapes = {{300, 7}, {37}, {70001}};  // 72138 elements
  const auto make = [&](std::vector<OptimParam>& params) {
    CounterRng rng{7, 0};
    for (size_t k = 0; k < shapes.size(); ++k) {
      params.push_back({"p" + std::to_string(k), Tensor::empty(shapes[k]), k != 1});
      for (int64_t i = 0; i < params[k].value.numel(); ++i) params[k].value.data<float>()[i] = rng.next_normal();
    }
  };
  std::vector<OptimParam> whole_params, split_params;
  make(whole_params);
  make(split_params);
  AdamW whole(whole_params, cfg);
  // [0, 1000) cuts p0; [1000, 2137) ends inside p2 after all of p1; [2137, 2137) is empty.
  std::vector<AdamW> parts;
  for (const ElementRange r : {ElementRange{0, 1000}, ElementRange{1000, 2137}, ElementRange{2137, 2137},
                               ElementRange{2137, 72138}})
    parts.emplace_back(split_params, cfg, r);
  EXPECT_EQ(parts[1].owned_part(0), (std::pair<int64_t, int64_t>{1000, 2100}));
  EXPECT_EQ(parts[1].owned_part(1), (std::pair<int64_t, int64_t>{0, 37}));
  EXPECT_EQ(parts[1].owned_part(2), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(parts[1].exp_avg()[0].numel(), 1100);
  ThreadPool pool(2);
  CounterRng rng{9, 0};
  for (int t = 1; t <= 3; ++t) {
    for (size_t k = 0; k < shapes.size(); ++k) {
      Tensor g = Tensor::empty(shapes[k]);
      for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] = rng.next_normal();
      whole_params[k].value.impl()->grad = g;
      split_params[k].value.impl()->grad = g;
    }
    whole.step(1e-2, 0.5f, pool);
    for (AdamW& p : parts) p.step(1e-2, 0.5f, pool);
  }
  for (size_t k = 0; k < shapes.size(); ++k)
    EXPECT_EQ(split_params[k].value.to_vector(), whole_params[k].value.to_vector()) << k;
}

}  // namespace
}  // namespace lathe::train
