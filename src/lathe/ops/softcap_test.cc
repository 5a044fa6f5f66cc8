#include "lathe/ops/softcap.h"

#include <gtest/gtest.h>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/softcap.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// One division, a tanh within 5 ulp, one product: 1e-6 relative.
TEST(Softcap, MatchesReferenceAtOddSizesAndSaturates) {
  for (Shape shape : {Shape{3, 37}, Shape{70001}}) {
    Tensor x = random_tensor(shape, 1, 40.f);
    std::vector<float> xv = x.to_vector(), y = softcap(x, 30.f).to_vector(), r(xv.size());
    ref::softcap(xv.data(), r.data(), static_cast<int64_t>(xv.size()), 30.0);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], r[i], 1e-6 * std::fabs(r[i]) + 1e-30) << i;
  }
  std::vector<float> y = softcap(Tensor::from_data({2}, {1e6f, -1e6f}), 50.f).to_vector();
  EXPECT_EQ(y[0], 50.f);
  EXPECT_EQ(y[1], -50.f);
}

TEST(Softcap, RejectsNonPositiveCap) { EXPECT_THROW(softcap(Tensor::zeros({2}), 0.f), InvalidArgument); }

// Smooth: eps 1e-2 central differences on inputs of scale 20 with cap 10 (the curved region): < 1e-3.
TEST(Softcap, GradientMatchesFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({4, 9}, 1, 20.f).set_requires_grad()};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return softcap(t[0], 10.f); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

}  // namespace
}  // namespace lathe
