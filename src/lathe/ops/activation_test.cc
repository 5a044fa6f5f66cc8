#include "lathe/ops/activation.h"

#include <gtest/gtest.h>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/activation.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

struct Case {
  Activation kind;
  double (*value)(double);
  double (*grad)(double);
  // |kernel − ref| ≤ (rtol + rtol_x2·x²)·|ref| + atol_x·|x| + 1e-37. silu: exp < 1 ulp plus 2 roundings.
  // gelu: the erfc fit (1.2e-7) plus the exponent −z² + p, z = x/√2, carried in f32: its absolute error
  // (≈ 1.5·z²·2⁻²³ ≈ 9e-8·x²) is exp's relative error (1.3e-5 at |x| = 12, where gelu ≈ 1e-32).
  // gelu_tanh: tanh's ≤ 5 ulp error near ±1 shows up absolutely through 1 + tanh (≈ 3e-7·½|x|), as torch.
  double rtol, rtol_x2, atol_x;
};

const Case kCases[] = {
    {Activation::kSilu, ref::silu, ref::silu_grad, 1e-6, 0, 0},
    {Activation::kGelu, ref::gelu, ref::gelu_grad, 5e-7, 1e-7, 0},
    {Activation::kGeluTanh, ref::gelu_tanh, ref::gelu_tanh_grad, 1e-6, 0, 3e-7},
};

// A dense grid over [−12, 12] (odd count, both tails, zero) plus a few extremes.
std::vector<float> grid() {
  std::vector<float> x;
  for (int i = 0; i <= 4801; ++i) x.push_back(-12.f + 24.f * static_cast<float>(i) / 4801.f);
  for (float v : {0.f, -0.f, 1e-20f, -1e-20f, 40.f, -40.f, 100.f, -100.f}) x.push_back(v);
  return x;
}

TEST(Activation, ValuesAndDerivativesMatchReference) {
  const std::vector<float> x = grid();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> y(n), ones(n, 1.f), dx(n);
  for (const Case& c : kCases) {
    activation_forward(c.kind, x.data(), nullptr, y.data(), n);
    activation_backward(c.kind, x.data(), nullptr, ones.data(), dx.data(), nullptr, n);
    for (int64_t i = 0; i < n; ++i) {
      const double xi = x[i], rtol = c.rtol + c.rtol_x2 * xi * xi;
      const double r = c.value(xi), tol = rtol * std::fabs(r) + c.atol_x * std::fabs(xi) + 1e-37;
      ASSERT_NEAR(y[i], r, tol) << activation_name(c.kind) << "(" << x[i] << ")";
      // Derivatives combine 2-3 approximated terms: a 4x looser bound, plus 1e-6 absolute where terms cancel.
      const double rg = c.grad(x[i]);
      ASSERT_NEAR(dx[i], rg, 4 * rtol * std::fabs(rg) + 4 * c.atol_x * std::fabs(xi) + 1e-6)
          << activation_name(c.kind) << "'(" << x[i] << ")";
    }
  }
}

TEST(Activation, NanPropagatesAndInfinitiesSaturate) {
  Tensor x = Tensor::from_data({3}, {NAN, INFINITY, -INFINITY});
  for (const Case& c : kCases) {
    std::vector<float> y = activation(x, c.kind).to_vector();
    EXPECT_TRUE(std::isnan(y[0])) << activation_name(c.kind);
    EXPECT_EQ(y[1], INFINITY) << activation_name(c.kind);
  }
}

// The threaded path (> 64K elements) computes each element the same way: identical to the small path.
TEST(Activation, ThreadedPathEqualsSerialElementwise) {
  Tensor x = random_tensor({70001}, 1, 4.f);
  for (const Case& c : kCases) {
    std::vector<float> big = activation(x, c.kind).to_vector();
    std::vector<float> xv = x.to_vector();
    for (int64_t i : {0L, 12345L, 70000L}) {
      float yi;
      activation_forward(c.kind, &xv[i], nullptr, &yi, 1);
      EXPECT_EQ(big[i], yi) << activation_name(c.kind) << " @" << i;
    }
  }
}

TEST(Activation, ParsesHfNames) {
  EXPECT_EQ(parse_activation("silu"), Activation::kSilu);
  EXPECT_EQ(parse_activation("swish"), Activation::kSilu);
  EXPECT_EQ(parse_activation("gelu"), Activation::kGelu);
  EXPECT_EQ(parse_activation("gelu_new"), Activation::kGeluTanh);
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), Activation::kGeluTanh);
  EXPECT_EQ(parse_activation("gelu_fast"), Activation::kGeluTanh);
  EXPECT_THROW(parse_activation("quick_gelu"), InvalidArgument);
  EXPECT_EQ(activation_name(Activation::kGeluTanh), "gelu_tanh");
}

// Smooth functions, eps 1e-2 central differences (truncation ~eps²·|f'''|/6 ≈ 1e-5, f32 output
// rounding ~1e-5 relative): 1e-3.
TEST(Activation, GradientsMatchFiniteDifferences) {
  for (const Case& c : kCases) {
    std::vector<Tensor> in = {random_tensor({5, 7}, 1, 2.f).set_requires_grad()};
    Activation kind = c.kind;
    auto r = gradcheck([kind](const std::vector<Tensor>& t) { return activation(t[0], kind); }, in);
    EXPECT_LT(r.max_rel_err, 1e-3) << activation_name(kind) << "\n" << r.report;
  }
}

}  // namespace
}  // namespace lathe
