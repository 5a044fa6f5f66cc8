#include "lathe/ops/elementwise.h"

#include <gtest/gtest.h>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/elementwise.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// One f32 operation per element in both kernel and reference: results must be bit-identical.
TEST(ElementwiseOps, MatchReferenceExactlyAtOddAndParallelSizes) {
  for (Shape shape : {Shape{3, 37}, Shape{70001}}) {  // 70001 > kParallelMinElems: the threaded path
    Tensor a = random_tensor(shape, 1), b = random_tensor(shape, 2);
    const int64_t n = a.numel();
    std::vector<float> av = a.to_vector(), bv = b.to_vector(), r(n);
    ref::add(av.data(), bv.data(), r.data(), n);
    EXPECT_EQ(add(a, b).to_vector(), r);
    ref::mul(av.data(), bv.data(), r.data(), n);
    EXPECT_EQ(mul(a, b).to_vector(), r);
    ref::scale(av.data(), 0.37f, r.data(), n);
    EXPECT_EQ(scale(a, 0.37f).to_vector(), r);
  }
}

TEST(ElementwiseOps, AcceptsNonContiguousViews) {
  Tensor a = random_tensor({5, 3}, 1), b = random_tensor({3, 5}, 2);
  Tensor at = a.transpose(0, 1);  // [3, 5], strided
  std::vector<float> atv = at.to_vector(), bv = b.to_vector(), r(15);
  ref::add(atv.data(), bv.data(), r.data(), 15);
  EXPECT_EQ(add(at, b).to_vector(), r);
}

TEST(ElementwiseOps, RejectsMismatchedShapesAndDtypes) {
  EXPECT_THROW(add(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})), InvalidArgument);
  EXPECT_THROW(mul(Tensor::zeros({2}), Tensor::zeros({2}, DType::kI32)), InvalidArgument);
}

// add, mul and scale are (bi)linear: central differences are exact up to f32 rounding of the outputs
// (~1e-7 relative / eps 1e-2 ≈ 1e-5), so 1e-3 leaves a wide margin.
TEST(ElementwiseOps, GradientsMatchFiniteDifferences) {
  auto in = [] {
    return std::vector<Tensor>{random_tensor({4, 7}, 1).set_requires_grad(),
                               random_tensor({4, 7}, 2).set_requires_grad()};
  };
  auto r_add = gradcheck([](const std::vector<Tensor>& t) { return add(t[0], t[1]); }, in());
  EXPECT_LT(r_add.max_rel_err, 1e-3) << r_add.report;
  auto r_mul = gradcheck([](const std::vector<Tensor>& t) { return mul(t[0], t[1]); }, in());
  EXPECT_LT(r_mul.max_rel_err, 1e-3) << r_mul.report;
  auto r_scale = gradcheck([](const std::vector<Tensor>& t) { return scale(t[0], -1.7f); },
                           {random_tensor({4, 7}, 3).set_requires_grad()});
  EXPECT_LT(r_scale.max_rel_err, 1e-3) << r_scale.report;
}

TEST(ElementwiseOps, MulGradientWithOneFrozenFactor) {
  std::vector<Tensor> in = {random_tensor({6}, 1).set_requires_grad(), random_tensor({6}, 2)};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return mul(t[0], t[1]); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

}  // namespace
}  // namespace lathe
