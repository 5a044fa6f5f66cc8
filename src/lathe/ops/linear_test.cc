#include "lathe/ops/linear.h"

#include <gtest/gtest.h>

#include "lathe/ops/gradcheck.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

TEST(Linear, MatchesNaiveProductWithBias) {
  Tensor x = random_tensor({3, 5, 7}, 1), w = random_tensor({4, 7}, 2), b = random_tensor({4}, 3);
  Tensor y = linear(x, w, b);
  ASSERT_EQ(y.shape(), (Shape{3, 5, 4}));
  auto xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector(), yv = y.to_vector();
  for (int r = 0; r < 15; ++r)
    for (int o = 0; o < 4; ++o) {
      double acc = bv[o];
      for (int i = 0; i < 7; ++i) acc += static_cast<double>(xv[r * 7 + i]) * wv[o * 7 + i];
      EXPECT_NEAR(yv[r * 4 + o], acc, 1e-5) << r << "," << o;
    }
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({6, 5}, 1).set_requires_grad(), random_tensor({3, 5}, 2).set_requires_grad(),
                            random_tensor({3}, 3).set_requires_grad()};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return linear(t[0], t[1], t[2]); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(Matmul, GradientsMatchFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({4, 6}, 1).set_requires_grad(), random_tensor({6, 3}, 2).set_requires_grad()};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return matmul(t[0], t[1]); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(Linear, RejectsMismatchedShapes) {
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), InvalidArgument);
}

TEST(Linear, Bf16WeightMatchesF32WithinRounding) {
  Tensor x = random_tensor({2, 64}, 1), w = random_tensor({8, 64}, 2);
  Tensor wb = w.to(DType::kBF16);
  auto y = linear(x, w).to_vector(), yb = linear(x, wb).to_vector();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], yb[i], 64 * 4 * (1.0 / 256) * 3);
}

}  // namespace
}  // namespace lathe
