#include <gtest/gtest.h>

#include "lathe/autograd/node.h"
#include "lathe/ops/activation.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/reshape.h"

namespace lathe {
namespace {

// The recomputed graph gives the gradients the recorded one gives, to the parameters used inside and to
// the input (which flows on to the parameters before it).
TEST(Checkpoint, GradientsEqualTheRecordedGraph) {
  std::vector<std::vector<float>> grads[2];
  float losses[2];
  for (int mode = 0; mode < 2; ++mode) {
    Tensor w0 = testing::random_tensor({6, 4}, 1, 0.1f), w1 = testing::random_tensor({5, 6}, 2, 0.07f);
    w0.set_requires_grad(true);
    w1.set_requires_grad(true);
    Tensor x = testing::random_tensor({3, 4}, 3, 0.3f);
    Tensor h = linear(x, w0);  // before the checkpoint: needs the input gradient
    const auto block = [&w1](const Tensor& in) { return activation(linear(activation(in, Activation::kGelu), w1), Activation::kSilu); };
    Tensor y = mode == 0 ? block(h) : checkpoint(block, h);
    Tensor loss = reshape(mul(y, y), {15});
    Tensor total = linear(reshape(loss, {1, 15}), Tensor::full({1, 15}, 1.f));  // sum as a 1x1 matmul
    losses[mode] = total.item();
    backward(total);
    grads[mode] = {w0.grad().to_vector(), w1.grad().to_vector()};
  }
  EXPECT_EQ(losses[0], losses[1]);  // the forward without recording computes the same values
  for (int p = 0; p < 2; ++p) {
    ASSERT_EQ(grads[0][p].size(), grads[1][p].size());
    for (size_t i = 0; i < grads[0][p].size(); ++i) EXPECT_NEAR(grads[1][p][i], grads[0][p][i], 1e-6f) << p << " " << i;
  }
}

TEST(Checkpoint, WithoutGradModeItIsAPlainCall) {
  NoGradGuard ng;
  Tensor w = testing::random_tensor({2, 2}, 4, 1.f);
  w.set_requires_grad(true);
  Tensor y = checkpoint([&w](const Tensor& in) { return linear(in, w); }, testing::random_tensor({1, 2}, 5, 1.f));
  EXPECT_FALSE(y.requires_grad());
}

}  // namespace
}  // namespace lathe
