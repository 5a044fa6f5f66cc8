#include "lathe/ops/linear.h"

#include <gtest/gtest.h>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/ops/elementwise.h"
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

// backward of Σ y0·g0 + Σ y1·g1 (one loss node over both outputs, as gradcheck builds for one).
void backward_pair(const Tensor& y0, const Tensor& y1) {
  Tensor g0 = random_tensor(y0.shape(), 11), g1 = random_tensor(y1.shape(), 12);
  Tensor loss = Tensor::full({1}, 0.f);
  record(loss, "pair_loss", {y0, y1}, [g0, g1](const Tensor&) -> std::vector<Tensor> { return {g0.clone(), g1.clone()}; });
  backward(loss);
}

// linear_pair is two linears: equal shapes (run side by side on a 2-thread pool) and unequal ones (one
// after the other); the same GEMMs on the same data, so values and gradients match exactly.
TEST(Linear, PairEqualsTwoLinearsAtOneAndTwoThreads) {
  for (int threads : {1, 2}) {
    Context ctx(threads);
    ContextScope scope(ctx);
    for (int64_t out1 : {96, 40}) {
      Tensor x = random_tensor({2, 37, 48}, 1).set_requires_grad(), w0 = random_tensor({96, 48}, 2).set_requires_grad(),
             w1 = random_tensor({out1, 48}, 3).set_requires_grad(), b1 = random_tensor({out1}, 4).set_requires_grad();
      auto [y0, y1] = linear_pair(x, w0, w1, Tensor(), b1);
      backward_pair(y0, y1);
      const std::vector<float> pgx = x.grad().to_vector(), pg0 = w0.grad().to_vector(), pg1 = w1.grad().to_vector(),
                               pgb = b1.grad().to_vector();
      x.zero_grad(), w0.zero_grad(), w1.zero_grad(), b1.zero_grad();
      Tensor z0 = linear(x, w0), z1 = linear(x, w1, b1);
      EXPECT_EQ(y0.to_vector(), z0.to_vector());
      EXPECT_EQ(y1.to_vector(), z1.to_vector());
      backward_pair(z0, z1);
      EXPECT_EQ(pgx, x.grad().to_vector()) << threads << " threads, out1 " << out1;
      EXPECT_EQ(pg0, w0.grad().to_vector());
      EXPECT_EQ(pg1, w1.grad().to_vector());
      EXPECT_EQ(pgb, b1.grad().to_vector());
    }
  }
}

TEST(Linear, PairGradientsMatchFiniteDifferences) {
  Context ctx(2);
  ContextScope scope(ctx);
  std::vector<Tensor> in = {random_tensor({6, 5}, 1).set_requires_grad(), random_tensor({3, 5}, 2).set_requires_grad(),
                            random_tensor({3, 5}, 3).set_requires_grad()};
  auto r = gradcheck(
      [](const std::vector<Tensor>& t) {
        auto [y0, y1] = linear_pair(t[0], t[1], t[2]);
        return add(y0, scale(y1, 0.5f));
      },
      in);
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
