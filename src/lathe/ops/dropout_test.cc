// dropout: the mask is a pure function of (key, element), scales kept elements by 1/(1-p), drops about a
// fraction p, and its gradient is the same mask; bf16 input keeps its dtype.
#include "lathe/ops/dropout.h"

#include <gtest/gtest.h>

#include "lathe/autograd/node.h"
#include "lathe/ops/gradcheck.h"

namespace lathe {
namespace {
using testing::random_tensor;

TEST(Dropout, MaskIsAPureFunctionOfTheKey) {
  const Tensor x = random_tensor({64, 33}, 1);
  EXPECT_EQ(dropout(x, 0.3f, 42).to_vector(), dropout(x, 0.3f, 42).to_vector());
  EXPECT_NE(dropout(x, 0.3f, 42).to_vector(), dropout(x, 0.3f, 43).to_vector());
  EXPECT_EQ(dropout(x, 0.f, 42).impl(), x.impl()) << "p = 0 is the identity";
}

TEST(Dropout, KeepsAboutOneMinusPScaled) {
  const float p = 0.25f;
  const Tensor x = Tensor::full({200, 50}, 1.f);
  const std::vector<float> y = dropout(x, p, 7).to_vector();
  int64_t kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.f || v == 1.f / (1.f - p)) << v;
    kept += v != 0.f;
  }
  // 10000 Bernoulli(0.75) draws: std 43, so +-250 is ~6 sigma.
  EXPECT_NEAR(static_cast<double>(kept), 0.75 * y.size(), 250.0);
}

TEST(Dropout, GradientIsTheMask) {
  Tensor x = random_tensor({8, 5}, 3);
  x.set_requires_grad();
  const auto r = testing::gradcheck([](const std::vector<Tensor>& t) { return dropout(t[0], 0.5f, 11); }, {x});
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(Dropout, Bf16InputStaysBf16) {
  const Tensor x = random_tensor({4, 16}, 5).to(DType::kBF16);
  const Tensor y = dropout(x, 0.5f, 9);
  EXPECT_EQ(y.dtype(), DType::kBF16);
  const std::vector<float> xv = x.to_vector(), yv = y.to_vector(),
                           f32 = dropout(x.to(DType::kF32), 0.5f, 9).to_vector();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(yv[i], f32[i]) << "x2 of a bf16 value is exact in bf16";
}

}  // namespace
}  // namespace lathe
