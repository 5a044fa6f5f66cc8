#include "lathe/ops/gated_mlp.h"

#include <gtest/gtest.h>

#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ref/gated_mlp.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

constexpr Activation kKinds[] = {Activation::kSilu, Activation::kGelu, Activation::kGeluTanh};

double ref_act(Activation kind, double x) {
  switch (kind) {
    case Activation::kSilu: return ref::silu(x);
    case Activation::kGelu: return ref::gelu(x);
    default: return ref::gelu_tanh(x);
  }
}

// act(gate) carries activation_test's bounds (≤ 5e-6 relative, 3e-7·|x| absolute for gelu_tanh); the
// product adds half an ulp.
TEST(GatedActivation, MatchesReferenceAtOddSizes) {
  Tensor gate = random_tensor({5, 37}, 1, 3.f), up = random_tensor({5, 37}, 2);
  std::vector<float> gv = gate.to_vector(), uv = up.to_vector();
  for (Activation kind : kKinds) {
    std::vector<float> y = gated_activation(gate, up, kind).to_vector(), r(gv.size());
    ref::gated_activation(gv.data(), uv.data(), r.data(), static_cast<int64_t>(gv.size()),
                          [kind](double x) { return ref_act(kind, x); });
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], r[i], 6e-6 * std::fabs(r[i]) + 3e-7 * std::fabs(gv[i] * uv[i]) + 1e-37)
          << activation_name(kind) << " @" << i;
  }
}

// Fusing must not change the arithmetic: act(gate) rounded to f32, then one product, as activation + mul.
TEST(GatedActivation, EqualsUnfusedComposition) {
  Tensor gate = random_tensor({3, 70001 / 3 + 1}, 1, 3.f), up = random_tensor({3, 70001 / 3 + 1}, 2);
  for (Activation kind : kKinds)
    EXPECT_EQ(gated_activation(gate, up, kind).to_vector(), mul(activation(gate, kind), up).to_vector())
        << activation_name(kind);
}

TEST(GatedActivation, RejectsMismatchedShapes) {
  EXPECT_THROW(gated_activation(Tensor::zeros({2, 4}), Tensor::zeros({2, 5}), Activation::kSilu), InvalidArgument);
}

// Smooth, eps 1e-2 central differences: < 1e-3 (see activation_test).
TEST(GatedActivation, GradientsMatchFiniteDifferences) {
  for (Activation kind : kKinds) {
    std::vector<Tensor> in = {random_tensor({4, 6}, 1, 2.f).set_requires_grad(),
                              random_tensor({4, 6}, 2).set_requires_grad()};
    auto r = gradcheck([kind](const std::vector<Tensor>& t) { return gated_activation(t[0], t[1], kind); }, in);
    EXPECT_LT(r.max_rel_err, 1e-3) << activation_name(kind) << "\n" << r.report;
  }
}

TEST(GatedActivation, GradientForUpOnly) {
  Tensor gate = random_tensor({3, 5}, 1);
  std::vector<Tensor> in = {random_tensor({3, 5}, 2).set_requires_grad()};
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return gated_activation(gate, t[0], Activation::kSilu); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(GatedMlp, EqualsLinearComposition) {
  Tensor x = random_tensor({3, 8}, 1), wg = random_tensor({12, 8}, 2), wu = random_tensor({12, 8}, 3);
  Tensor wd = random_tensor({8, 12}, 4);
  Tensor y = gated_mlp(x, wg, wu, wd, Activation::kSilu);
  ASSERT_EQ(y.shape(), (Shape{3, 8}));
  EXPECT_EQ(y.to_vector(),
            linear(mul(activation(linear(x, wg), Activation::kSilu), linear(x, wu)), wd).to_vector());
}

// Two matmuls around a smooth point-wise op: 2e-3 (the GEMM's f32 sums add ~1e-6 to the rounding term).
TEST(GatedMlp, GradientsMatchFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({2, 4}, 1).set_requires_grad(), random_tensor({6, 4}, 2, 0.5f).set_requires_grad(),
                            random_tensor({6, 4}, 3, 0.5f).set_requires_grad(), random_tensor({4, 6}, 4, 0.5f).set_requires_grad()};
  auto r = gradcheck(
      [](const std::vector<Tensor>& t) { return gated_mlp(t[0], t[1], t[2], t[3], Activation::kGeluTanh); }, in);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
}

}  // namespace
}  // namespace lathe
