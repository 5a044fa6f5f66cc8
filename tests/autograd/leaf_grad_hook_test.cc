// LeafGradHook fires once per leaf and backward(), after every use of the leaf has been summed: what
// the overlapped gradient all-reduce (train/grad_bucketer.h) relies on to send a gradient early.
#include <gtest/gtest.h>

#include <map>

#include "lathe/autograd/node.h"
#include "lathe/ops/activation.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/reshape.h"

namespace lathe {
namespace {

Tensor sum_all(const Tensor& y /* [R, K] */) {  // -> [1, 1], as a matmul with ones
  return linear(reshape(y, {1, y.numel()}), Tensor::full({1, y.numel()}, 1.f));
}

// A weight used twice (like a tied embedding: the lookup and the head) fires once, with its final value.
TEST(LeafGradHook, TiedWeightFiresOnceAfterBothUses) {
  for (bool recompute : {false, true}) {
    Tensor w = testing::random_tensor({4, 4}, 1, 0.1f), u = testing::random_tensor({4, 4}, 2, 0.05f);
    w.set_requires_grad(true);
    u.set_requires_grad(true);
    const Tensor x = testing::random_tensor({3, 4}, 3, 0.3f);
    const auto middle = [&u](const Tensor& in) { return activation(linear(in, u), Activation::kGelu); };
    Tensor h = linear(x, w);                                  // first use of w
    h = recompute ? checkpoint(middle, h) : middle(h);        // u used inside the recomputed region
    Tensor y = linear(h, w);                                  // second use of w
    std::map<const TensorImpl*, int> fired;
    std::map<const TensorImpl*, std::vector<float>> at_fire;
    {
      LeafGradHookScope scope([&](TensorImpl& leaf) {
        ++fired[&leaf];
        at_fire[&leaf] = leaf.grad.to_vector();
      });
      backward(sum_all(mul(y, y)));
    }
    EXPECT_EQ(fired[w.impl()], 1) << recompute;
    EXPECT_EQ(fired[u.impl()], 1) << recompute;
    EXPECT_EQ(at_fire[w.impl()], w.grad().to_vector()) << "w fired before its second use was added";
    EXPECT_EQ(at_fire[u.impl()], u.grad().to_vector());
  }
}

TEST(LeafGradHook, ScopeEndsTheHook) {
  Tensor w = testing::random_tensor({2, 2}, 4, 1.f);
  w.set_requires_grad(true);
  int fired = 0;
  { LeafGradHookScope scope([&](TensorImpl&) { ++fired; }); }
  backward(sum_all(linear(testing::random_tensor({1, 2}, 5, 1.f), w)));
  EXPECT_EQ(fired, 0);
}

}  // namespace
}  // namespace lathe
