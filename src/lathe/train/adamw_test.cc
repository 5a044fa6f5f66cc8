#include "lathe/train/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lathe/base/rng.h"
#include "lathe/train/adamw_update.h"

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

// The update kernel of every tier this CPU runs, called directly: odd lengths around the 8 / 16 lanes and
// every misalignment of the buffers (masked head, streamed body, masked tail). The SIMD tiers do the same
// IEEE operations lane by lane, so they agree bit for bit with each other and whatever the alignment; the
// portable loop (which the compiler may contract into FMAs) agrees to a few ulps.
TEST(AdamW, UpdateKernelOfEachTierMatchesThePortableOne) {
  const AdamWScalars s{.grad_scale = 0.5f, .b1 = 0.9f, .b2 = 0.95f, .step_size = 3e-3f, .inv_sqrt_bc2 = 1.7f,
                       .eps = 1e-8f, .decay = 1e-4f};
  CounterRng rng{11, 0};
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 33, 1000, 4099}) {
    std::vector<float> init(static_cast<size_t>(4 * n));  // theta, m, v, grad
    for (float& x : init) x = rng.next_normal();
    for (int64_t j = 0; j < n; ++j) init[static_cast<size_t>(2 * n + j)] = std::abs(init[2 * n + j]);  // v >= 0
    std::vector<float> simd;  // the first SIMD tier's result at the first offset
    for (int64_t offset : {0, 1, 3, 8, 13}) {  // floats from a 64-byte boundary
      const auto run = [&](cpu::CpuTier tier) {
        // theta, m, v, grad, each at `offset` floats past a 64-byte boundary.
        std::vector<std::vector<float>> bufs(4, std::vector<float>(static_cast<size_t>(n + 32)));
        float* p[4];
        for (int b = 0; b < 4; ++b) {
          const uintptr_t base = reinterpret_cast<uintptr_t>(bufs[b].data());
          p[b] = reinterpret_cast<float*>((base + 63) / 64 * 64) + offset;
          std::memcpy(p[b], init.data() + b * n, static_cast<size_t>(n) * sizeof(float));
        }
        adamw_update(tier, p[0], p[1], p[2], p[3], n, s);
        std::vector<float> out;
        for (int b = 0; b < 3; ++b) out.insert(out.end(), p[b], p[b] + n);
        return out;
      };
      const std::vector<float> portable = run(cpu::CpuTier::kScalar);
      for (cpu::CpuTier tier : {cpu::CpuTier::kAvx2, cpu::CpuTier::kAvx512}) {
        if (tier > cpu::cpu_max_tier()) continue;
        const std::vector<float> got = run(tier);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], portable[i], 1e-6f * std::max(1.f, std::abs(portable[i])))
              << cpu::cpu_tier_name(tier) << " n=" << n << " offset=" << offset << " at " << i;
        if (simd.empty()) simd = got;
        else ASSERT_EQ(got, simd) << cpu::cpu_tier_name(tier) << " n=" << n << " offset=" << offset;
      }
    }
  }
}

}  // namespace
}  // namespace lathe::train
