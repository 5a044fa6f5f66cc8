// LoRA inside nn linear(): the unfused formula y = x·Wᵀ + b + s·((x·Aᵀ)·Bᵀ), gradients of A and B by
// finite differences, B = 0 and o.lora = false give the plain linear bit for bit, the bf16 compute path,
// linear_pair, and deterministic dropout.
#include "lathe/nn/lora.h"

#include <gtest/gtest.h>

#include "lathe/autograd/node.h"
#include "lathe/nn/linear.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"

namespace lathe {
namespace {
using testing::random_tensor;

constexpr int64_t kIn = 7, kOut = 5, kRank = 3;

Linear make_adapted(uint32_t seed, float scaling = 0.75f) {
  Linear l{random_tensor({kOut, kIn}, seed), random_tensor({kOut}, seed + 1), Tensor()};
  l.lora = LoraAdapter{
      .a = random_tensor({kRank, kIn}, seed + 2), .b = random_tensor({kOut, kRank}, seed + 3), .scaling = scaling};
  return l;
}

// The unfused formula in double, from the tensors' values.
std::vector<double> reference(const Tensor& x, const Linear& l) {
  const std::vector<float> xv = x.to_vector(), w = l.weight.to_vector(), b = l.bias.to_vector(),
                           a = l.lora.a.to_vector(), bb = l.lora.b.to_vector();
  const int64_t n = x.numel() / kIn;
  std::vector<double> y(n * kOut);
  for (int64_t r = 0; r < n; ++r) {
    std::vector<double> h(kRank, 0.0);
    for (int64_t k = 0; k < kRank; ++k)
      for (int64_t i = 0; i < kIn; ++i) h[k] += static_cast<double>(xv[r * kIn + i]) * a[k * kIn + i];
    for (int64_t o = 0; o < kOut; ++o) {
      double v = b[o];
      for (int64_t i = 0; i < kIn; ++i) v += static_cast<double>(xv[r * kIn + i]) * w[o * kIn + i];
      double d = 0;
      for (int64_t k = 0; k < kRank; ++k) d += h[k] * bb[o * kRank + k];
      y[r * kOut + o] = v + l.lora.scaling * d;
    }
  }
  return y;
}

TEST(NnLora, MatchesTheUnfusedFormula) {
  const Linear l = make_adapted(1);
  const Tensor x = random_tensor({2, 3, kIn}, 9);  // any leading dims
  const Tensor y = linear(x, l);
  ASSERT_EQ(y.shape(), (Shape{2, 3, kOut}));
  const std::vector<float> got = y.to_vector();
  const std::vector<double> want = reference(x, l);
  // f32 sums of 7 products of N(0,1) values: 1e-5 absolute is ~100 ulps of the largest terms.
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(NnLora, AdapterOffOrZeroBIsThePlainLinearExactly) {
  Linear l = make_adapted(2);
  const Tensor x = random_tensor({4, kIn}, 3);
  const std::vector<float> plain = linear(x, l.weight, l.bias).to_vector();
  EXPECT_EQ(linear(x, l, {.lora = false}).to_vector(), plain);
  EXPECT_NE(linear(x, l).to_vector(), plain) << "the adapter must change the output";
  l.lora.b = Tensor::zeros({kOut, kRank});
  EXPECT_EQ(linear(x, l).to_vector(), plain) << "B = 0 (PEFT's init) adds exactly zero";
}

TEST(NnLora, GradientsOfAAndBMatchFiniteDifferences) {
  const Linear base = make_adapted(4);
  Tensor a = base.lora.a.clone(), b = base.lora.b.clone(), x = random_tensor({3, kIn}, 5);
  a.set_requires_grad();
  b.set_requires_grad();
  x.set_requires_grad();
  const auto fn = [&](const std::vector<Tensor>& t) {
    Linear l{base.weight, base.bias, Tensor()};
    l.lora = LoraAdapter{.a = t[0], .b = t[1], .scaling = base.lora.scaling};
    return linear(t[2], l);
  };
  const auto r = testing::gradcheck(fn, {a, b, x});
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(NnLora, FrozenBaseGetsNoGradient) {
  Linear l = make_adapted(6);
  l.lora.a.set_requires_grad();
  l.lora.b.set_requires_grad();
  backward(linear(random_tensor({3, kIn}, 7), l), Tensor::full({3, kOut}, 1.f));
  EXPECT_TRUE(l.lora.a.grad().defined());
  EXPECT_TRUE(l.lora.b.grad().defined());
  EXPECT_FALSE(l.weight.grad().defined());
  EXPECT_FALSE(l.bias.grad().defined());
}

TEST(NnLora, PairAppliesEachAdapter) {
  const Linear a = make_adapted(10), b = make_adapted(20, 2.f);
  const Tensor x = random_tensor({4, kIn}, 8);
  auto [ya, yb] = linear_pair(x, a, b);
  EXPECT_EQ(ya.to_vector(), linear(x, a).to_vector());
  EXPECT_EQ(yb.to_vector(), linear(x, b).to_vector());
}

TEST(NnLora, Bf16ComputeReachesTheF32Adapter) {
  Linear l = make_adapted(30);
  l.bf16 = Tensor::empty({kOut, kIn}, DType::kBF16);
  stochastic_round_bf16(l.weight, l.bf16, 1);
  l.lora.a.set_requires_grad();
  l.lora.b.set_requires_grad();
  const Tensor x = random_tensor({3, kIn}, 31);
  const ForwardOptions o{.bf16 = true};
  const Tensor y = linear(x, l, o);
  // bf16 compute: bf16 x, W and A, f32 sums; compare with the f32 formula at bf16 tolerance (2^-8 relative
  // per rounded input, sums of 7 products of N(0,1) values and 3 rank terms: 0.1 absolute is generous but
  // far below the adapter's own size, which the second check proves).
  const std::vector<float> got = y.to_vector(), want = linear(x, l).to_vector();
  const std::vector<float> no_adapter = linear(x, l, {.bf16 = true, .lora = false}).to_vector();
  double max_diff = 0, max_delta = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    max_delta = std::max(max_delta, std::fabs(static_cast<double>(got[i]) - no_adapter[i]));
  }
  EXPECT_LT(max_diff, 0.1);
  EXPECT_GT(max_delta, 0.1);
  backward(y, Tensor::full({3, kOut}, 1.f));
  ASSERT_TRUE(l.lora.a.grad().defined());
  EXPECT_EQ(l.lora.a.grad().dtype(), DType::kF32);
  EXPECT_TRUE(l.lora.b.grad().defined());
}

TEST(NnLora, DropoutIsDeterministicAndTrainingOnly) {
  Linear l = make_adapted(40);
  l.lora.dropout = 0.5f;
  l.lora.dropout_stream = 3;
  const Tensor x = random_tensor({6, kIn}, 41);
  const std::vector<float> eval = linear(x, l).to_vector();
  EXPECT_EQ(eval, linear(x, l, {.lora_dropout = false, .dropout_key = 5}).to_vector()) << "off unless asked";
  const ForwardOptions train{.lora_dropout = true, .dropout_key = 5};
  const std::vector<float> t1 = linear(x, l, train).to_vector();
  EXPECT_EQ(t1, linear(x, l, train).to_vector()) << "same key, same mask";
  EXPECT_NE(t1, eval);
  EXPECT_NE(t1, linear(x, l, {.lora_dropout = true, .dropout_key = 6}).to_vector());
}

}  // namespace
}  // namespace lathe
