#include "lathe/ops/rms_norm.h"

#include <gtest/gtest.h>

#include "lathe/base/context.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ref/rms_norm.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// Kernel (f32 lane sums of C squares, then rsqrt and two products) vs the double reference: the sum's
// relative error is ≲ log2(C)·2⁻²⁴ for lane-wise partial sums, plus ~4 roundings: 4e-6 is a safe bound.
void expect_matches_reference(int64_t n, int64_t c, float eps, float offset) {
  Tensor x = random_tensor({n, c}, 1, 3.f), w = random_tensor({c}, 2);
  std::vector<float> y = rms_norm(x, w, eps, offset).to_vector();
  const std::vector<float> xf = x.to_vector();
  std::vector<double> xv(xf.begin(), xf.end()), r(n * c);
  std::vector<float> wf = w.to_vector();
  std::vector<double> wv(wf.begin(), wf.end());
  ref::rms_norm(xv.data(), wv.data(), n, c, eps, offset, r.data());
  for (int64_t i = 0; i < n * c; ++i) ASSERT_NEAR(y[i], r[i], 1e-7 + 4e-6 * std::fabs(r[i])) << n << "x" << c << " @" << i;
}

TEST(RmsNorm, MatchesReferenceAtOddSizes) {
  expect_matches_reference(7, 37, 1e-6f, 0.f);
  expect_matches_reference(3, 1, 1e-5f, 0.f);
  expect_matches_reference(5, 129, 1e-6f, 1.f);  // Gemma's (1 + w)
}

TEST(RmsNorm, MatchesReferenceOnTheThreadedPath) { expect_matches_reference(300, 301, 1e-6f, 0.f); }

// A bf16 weight is converted exactly to f32 once, so it must equal the f32 run on the widened weight.
TEST(RmsNorm, Bf16WeightEqualsItsF32Widening) {
  Tensor x = random_tensor({4, 33}, 1), wb = random_tensor({33}, 2).to(DType::kBF16);
  EXPECT_EQ(rms_norm(x, wb, 1e-6f, 1.f).to_vector(), rms_norm(x, wb.to(DType::kF32), 1e-6f, 1.f).to_vector());
}

TEST(RmsNorm, HandlesLeadingDimsAndStridedInput) {
  Tensor x = random_tensor({2, 3, 8}, 1), w = random_tensor({8}, 2);
  Tensor y = rms_norm(x, w, 1e-6f);
  ASSERT_EQ(y.shape(), x.shape());
  Tensor xt = random_tensor({8, 5}, 3).transpose(0, 1);  // [5, 8] strided
  EXPECT_EQ(rms_norm(xt, w, 1e-6f).to_vector(), rms_norm(xt.contiguous(), w, 1e-6f).to_vector());
}

TEST(RmsNorm, RejectsBadWeight) {
  EXPECT_THROW(rms_norm(Tensor::zeros({2, 4}), Tensor::zeros({5}), 1e-6f), InvalidArgument);
  EXPECT_THROW(rms_norm(Tensor::zeros({2, 4}), Tensor::zeros({4}).to(DType::kBF16).set_requires_grad(), 1e-6f),
               InvalidArgument);
}

// Smooth op, central differences with eps 1e-2 on unit-scale inputs: truncation error ~eps²·|f'''| ~1e-4
// and f32 output rounding ~1e-7/eps = 1e-5 relative, so rel err < 2e-3 is the honest bound.
TEST(RmsNorm, GradientsMatchFiniteDifferences) {
  for (float offset : {0.f, 1.f}) {
    std::vector<Tensor> in = {random_tensor({3, 9}, 1).set_requires_grad(), random_tensor({9}, 2).set_requires_grad()};
    auto r = gradcheck([offset](const std::vector<Tensor>& t) { return rms_norm(t[0], t[1], 1e-5f, offset); }, in);
    EXPECT_LT(r.max_rel_err, 2e-3) << "offset " << offset << "\n" << r.report;
  }
}

// The threaded backward (per-task partials of dw, summed in task order) must agree with the one-thread
// run up to the summation order of 300 f32 terms (≲ 1e-5 relative).
TEST(RmsNorm, ThreadedGradientsMatchSingleThread) {
  Tensor x = random_tensor({300, 300}, 1), w = random_tensor({300}, 2), g = random_tensor({300, 300}, 3);
  auto grads = [&](int n_threads) {
    Context ctx(n_threads);
    ContextScope scope(ctx);
    Tensor xr = x.clone().set_requires_grad(), wr = w.clone().set_requires_grad();
    Tensor y = rms_norm(xr, wr, 1e-6f);
    Tensor loss = Tensor::full({1}, 0.f);
    record(loss, "test_seed", {y}, [g](const Tensor&) -> std::vector<Tensor> { return {g.clone()}; });
    backward(loss);
    return std::make_pair(xr.grad().to_vector(), wr.grad().to_vector());
  };
  auto [dx1, dw1] = grads(1);
  auto [dx3, dw3] = grads(3);
  EXPECT_EQ(dx1, dx3);  // per-row work: identical whatever the split
  for (size_t j = 0; j < dw1.size(); ++j) EXPECT_NEAR(dw1[j], dw3[j], 1e-5 * (1 + std::fabs(dw1[j]))) << j;
}

}  // namespace
}  // namespace lathe
