// nn linear(x, Linear, ForwardOptions): f32 by default, the bf16 copy only when asked for and present,
// gradients on the f32 master either way; linear_pair equals two linears.
#include "lathe/nn/linear.h"

#include <gtest/gtest.h>

#include "lathe/autograd/node.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"

namespace lathe {
namespace {
using testing::random_tensor;

Linear make_linear(uint32_t seed) {
  Linear l{random_tensor({5, 7}, seed).set_requires_grad(), random_tensor({5}, seed + 1), Tensor()};
  l.bf16 = Tensor::empty({5, 7}, DType::kBF16);
  stochastic_round_bf16(l.weight, l.bf16, seed + 2);
  return l;
}

TEST(NnLinear, AppliesTheBf16CopyOnlyWhenAskedFor) {
  const Linear l = make_linear(1);
  const Tensor x = random_tensor({3, 7}, 9);
  EXPECT_EQ(linear(x, l).to_vector(), linear(x, l.weight, l.bias).to_vector());
  const std::vector<float> bf16 = linear(to_bf16(x), bf16_compute_weight(l.weight, l.bf16), l.bias).to_vector();
  EXPECT_EQ(linear(x, l, {.bf16 = true}).to_vector(), bf16);
  EXPECT_NE(bf16, linear(x, l).to_vector()) << "the bf16 path must round";
  const Linear no_copy{l.weight, l.bias, Tensor()};
  EXPECT_EQ(linear(x, no_copy, {.bf16 = true}).to_vector(), linear(x, l).to_vector()) << "no copy: f32";
}

TEST(NnLinear, Bf16GradientReachesTheF32Master) {
  Linear l = make_linear(2);
  backward(linear(random_tensor({3, 7}, 4), l, {.bf16 = true}), Tensor::full({3, 5}, 1.f));
  ASSERT_TRUE(l.weight.grad().defined());
  EXPECT_EQ(l.weight.grad().dtype(), DType::kF32);
}

TEST(NnLinear, PairEqualsTwoLinears) {
  const Linear a = make_linear(3), b = make_linear(6);
  const Tensor x = random_tensor({4, 7}, 8);
  for (const bool bf16 : {false, true}) {
    const ForwardOptions o{.bf16 = bf16};
    auto [ya, yb] = linear_pair(x, a, b, o);
    EXPECT_EQ(ya.to_vector(), linear(x, a, o).to_vector());
    EXPECT_EQ(yb.to_vector(), linear(x, b, o).to_vector());
  }
}

}  // namespace
}  // namespace lathe
