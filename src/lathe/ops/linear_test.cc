#include "lathe/ops/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

// The low-rank term: every gradient by finite differences, with the term reading x itself (its share of
// dx added into the base's) and reading another tensor (as after a dropout), base weight trained or not.
TEST(LinearLowRank, GradientsMatchFiniteDifferences) {
  for (bool own_input : {false, true}) {
    std::vector<Tensor> in = {random_tensor({6, 5}, 1).set_requires_grad(), random_tensor({4, 5}, 2).set_requires_grad(),
                              random_tensor({4}, 3).set_requires_grad(), random_tensor({3, 5}, 4).set_requires_grad(),
                              random_tensor({4, 3}, 5).set_requires_grad()};
    if (own_input) in.push_back(random_tensor({6, 5}, 6).set_requires_grad());
    auto r = gradcheck(
        [own_input](const std::vector<Tensor>& t) {
          return linear(t[0], t[1], t[2], LowRankTerm{own_input ? t[5] : t[0], t[3], t[4], 0.7f});
        },
        in);
    EXPECT_LT(r.max_rel_err, 1e-3) << "own input " << own_input << ": " << r.report;
  }
}

// The same op as the composed ops it replaces, y = linear(x, w, b) + linear(scaling·linear(x, a), b_term),
// on sizes where the rank-16 products take the GEMM's blocked and skinny paths, at 1 and 2 threads:
// values and every gradient within f32 reordering error, frozen base or not.
TEST(LinearLowRank, EqualsTheComposedOps) {
  for (int threads : {1, 2}) {
    Context ctx(threads);
    ContextScope scope(ctx);
    for (bool train_base : {false, true}) {
      Tensor x = random_tensor({3, 41, 48}, 1).set_requires_grad(), w = random_tensor({80, 48}, 2),
             b = random_tensor({80}, 3), a = random_tensor({16, 48}, 4).set_requires_grad(),
             bt = random_tensor({80, 16}, 5).set_requires_grad();
      if (train_base) {
        w.set_requires_grad();
        b.set_requires_grad();
      }
      const Tensor g = random_tensor({3, 41, 80}, 6);
      const Tensor fused = linear(x, w, b, LowRankTerm{x, a, bt, 0.375f});
      backward(fused, g);
      const std::vector<Tensor> got = {x.grad(), a.grad(), bt.grad(), train_base ? w.grad() : Tensor(),
                                       train_base ? b.grad() : Tensor()};
      for (Tensor* t : {&x, &w, &b, &a, &bt}) t->zero_grad();
      const Tensor composed = add(linear(x, w, b), linear(scale(linear(x, a), 0.375f), bt));
      backward(composed, g);
      const std::vector<Tensor> want = {x.grad(), a.grad(), bt.grad(), train_base ? w.grad() : Tensor(),
                                        train_base ? b.grad() : Tensor()};
      const auto max_diff = [](const Tensor& p, const Tensor& q) {
        const std::vector<float> pv = p.to_vector(), qv = q.to_vector();
        EXPECT_EQ(pv.size(), qv.size());
        double m = 0;
        for (size_t i = 0; i < pv.size() && i < qv.size(); ++i) m = std::max(m, std::fabs(double{pv[i]} - qv[i]));
        return m;
      };
      // Sums of 48 to 123 products of N(0,1) values (gradients: up to 123 · 80): 1e-3 is ~10 ulps of the largest.
      EXPECT_LT(max_diff(fused, composed), 1e-3) << threads << " threads";
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].defined(), want[i].defined()) << i;
        if (got[i].defined()) {
          EXPECT_LT(max_diff(got[i], want[i]), 2e-3) << "gradient " << i << ", " << threads << " threads";
        }
      }
      EXPECT_FALSE(!train_base && w.grad().defined()) << "a frozen base gets no gradient";
    }
  }
}

TEST(LinearLowRank, RejectsATermThatDoesNotFit) {
  const Tensor x = Tensor::zeros({2, 5}), w = Tensor::zeros({4, 5});
  EXPECT_THROW(linear(x, w, Tensor(), LowRankTerm{x, Tensor::zeros({3, 6}), Tensor::zeros({4, 3})}), InvalidArgument);
  EXPECT_THROW(linear(x, w, Tensor(), LowRankTerm{x, Tensor::zeros({3, 5}), Tensor::zeros({4, 2})}), InvalidArgument);
  EXPECT_THROW(linear(x, w, Tensor(), LowRankTerm{Tensor::zeros({3, 5}), Tensor::zeros({3, 5}), Tensor::zeros({4, 3})}),
               InvalidArgument);
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

// An f16 weight (an f16 checkpoint, frozen) computes exactly what its values widened to f32 give, up to f32
// summation order, through the skinny-M (M = 2) and blocked (M = 40) paths, with a bias; dx flows back
// through it; a weight gradient is refused (it would need an f16 gradient).
TEST(Linear, F16WeightMatchesF32OnTheSameValues) {
  const Tensor w16 = random_tensor({9, 67}, 2).to(DType::kF16), w32 = w16.to(DType::kF32), b = random_tensor({9}, 3);
  EXPECT_NE(w32.to_vector(), random_tensor({9, 67}, 2).to_vector()) << "the f16 weight must be rounded";
  for (int64_t m : {2, 40}) {
    Tensor x16 = random_tensor({m, 67}, 1).set_requires_grad(), x32 = x16.detach().clone().set_requires_grad();
    const Tensor y16 = linear(x16, w16, b), y32 = linear(x32, w32, b);
    const auto a = y16.to_vector(), e = y32.to_vector();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], e[i], 1e-5 * (1 + std::fabs(e[i]))) << "m=" << m << " " << i;
    backward(y16, Tensor::full(y16.shape(), 1.f));
    backward(y32, Tensor::full(y32.shape(), 1.f));
    const auto dx = x16.grad().to_vector(), dx_want = x32.grad().to_vector();
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], dx_want[i], 1e-5 * (1 + std::fabs(dx_want[i]))) << i;
  }
  Tensor leaf = w16.clone().set_requires_grad();
  try {
    linear(random_tensor({2, 67}, 1), leaf);
    FAIL() << "an f16 weight that requires grad must be refused";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("f16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
