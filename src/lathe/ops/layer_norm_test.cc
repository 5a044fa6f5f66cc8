#include "lathe/ops/layer_norm.h"

#include <gtest/gtest.h>

#include "lathe/base/context.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ref/layer_norm.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// f32 two-pass mean/variance vs double. With inputs offset to |μ| ≈ 4 (which also tests that the two-pass
// variance does not cancel) the mean's f32 sum errs by up to ≈ √C·2⁻²⁴·|μ| ≈ 4e-6 absolute when summed
// sequentially (unvectorised builds), and x − μ carries it into y; plus ~5 roundings relative.
void expect_matches_reference(int64_t n, int64_t c, bool bias) {
  Tensor x = random_tensor({n, c}, 1, 2.f), w = random_tensor({c}, 2), b = random_tensor({c}, 3);
  std::vector<float> xv = x.to_vector();
  for (float& v : xv) v += 4.f;
  x = Tensor::from_data({n, c}, xv);
  std::vector<float> y = layer_norm(x, w, bias ? b : Tensor(), 1e-5f).to_vector();
  std::vector<float> wv = w.to_vector(), bv = b.to_vector(), r(n * c);
  ref::layer_norm(xv.data(), wv.data(), bias ? bv.data() : nullptr, n, c, 1e-5, r.data());
  for (int64_t i = 0; i < n * c; ++i) ASSERT_NEAR(y[i], r[i], 4e-6 + 4e-6 * std::fabs(r[i])) << n << "x" << c << " @" << i;
}

TEST(LayerNorm, MatchesReferenceAtOddSizes) {
  expect_matches_reference(7, 37, true);
  expect_matches_reference(2, 3, false);
}

TEST(LayerNorm, MatchesReferenceOnTheThreadedPath) { expect_matches_reference(300, 301, true); }

TEST(LayerNorm, RejectsBadParameters) {
  EXPECT_THROW(layer_norm(Tensor::zeros({2, 4}), Tensor::zeros({4}), Tensor::zeros({3}), 1e-5f), InvalidArgument);
  EXPECT_THROW(layer_norm(Tensor::zeros({2, 4}), Tensor::zeros({5}), Tensor(), 1e-5f), InvalidArgument);
}

// Smooth op: eps 1e-2 central differences (truncation ~1e-4, f32 rounding ~1e-5 relative): < 2e-3.
TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({3, 9}, 1).set_requires_grad(), random_tensor({9}, 2).set_requires_grad(),
                            random_tensor({9}, 3).set_requires_grad()};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], t[2], 1e-5f); }, in);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
}

TEST(LayerNorm, GradientsWithoutBiasAndWithFrozenWeight) {
  std::vector<Tensor> in = {random_tensor({4, 6}, 1).set_requires_grad(), random_tensor({6}, 2)};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return layer_norm(t[0], t[1], Tensor(), 1e-5f); }, in);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
}

// The threaded backward (per-task partials of dw and db, summed in task order) must agree with the
// one-thread run up to the summation order of 300 f32 terms (≲ 1e-5 relative).
TEST(LayerNorm, ThreadedGradientsMatchSingleThread) {
  Tensor x = random_tensor({300, 300}, 1), w = random_tensor({300}, 2), b = random_tensor({300}, 3);
  Tensor g = random_tensor({300, 300}, 4);
  auto grads = [&](int n_threads) {
    Context ctx(n_threads);
    ContextScope scope(ctx);
    Tensor xr = x.clone().set_requires_grad(), wr = w.clone().set_requires_grad(), br = b.clone().set_requires_grad();
    Tensor y = layer_norm(xr, wr, br, 1e-5f);
    Tensor loss = Tensor::full({1}, 0.f);
    record(loss, "test_seed", {y}, [g](const Tensor&) -> std::vector<Tensor> { return {g.clone()}; });
    backward(loss);
    return std::vector<std::vector<float>>{xr.grad().to_vector(), wr.grad().to_vector(), br.grad().to_vector()};
  };
  auto one = grads(1), three = grads(3);
  EXPECT_EQ(one[0], three[0]);  // per-row work: identical whatever the split
  for (int k = 1; k < 3; ++k)
    for (size_t j = 0; j < one[k].size(); ++j)
      EXPECT_NEAR(one[k][j], three[k][j], 1e-5 * (1 + std::fabs(one[k][j]))) << k << " " << j;
}

}  // namespace
}  // namespace lathe
