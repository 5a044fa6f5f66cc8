#include "lathe/ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/rope.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

Tensor positions_tensor(const Shape& shape, int32_t first, int32_t step) {
  std::vector<int32_t> v(shape_numel(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = first + static_cast<int32_t>(i) * step;
  return Tensor::from_data_i32(shape, v);
}

// Kernel vs reference. f32 output of |x| ~ 1: cos/sin and two rounded products -> a few ulp of 1.
void expect_matches_reference(const Tensor& x, const Tensor& pos, const std::vector<float>& inv) {
  Tensor y = rope(x, pos, inv);
  const Shape& s = x.shape();
  std::vector<float> xv = x.to_vector(), ref(xv.size());
  std::vector<int32_t> pv(pos.data<int32_t>(), pos.data<int32_t>() + pos.numel());
  ref::rope(xv.data(), ref.data(), s[0], s[1], s[2], s[3], pv.data(), pos.dim() == 2, inv.data(),
            static_cast<int64_t>(inv.size()));
  std::vector<float> yv = y.to_vector();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(yv[i], ref[i], 4e-6 * (1 + std::abs(ref[i]))) << i;
}

TEST(Rope, MatchesReferenceSharedPositions) {
  Tensor x = random_tensor({2, 7, 3, 18}, 1);
  expect_matches_reference(x, positions_tensor({7}, 0, 1), rope_inv_freq({.theta = 10000.f, .rotary_dim = 18}));
}

TEST(Rope, MatchesReferencePerBatchPositionsAndPartialRotary) {
  // Partial rotary (R = 12 of D = 20, as partial_rotary_factor 0.6): the last 8 dims pass through.
  Tensor x = random_tensor({3, 5, 2, 20}, 2);
  expect_matches_reference(x, positions_tensor({3, 5}, 1000, 37), rope_inv_freq({.theta = 500000.f, .rotary_dim = 12}));
  Tensor y = rope(x, positions_tensor({3, 5}, 0, 1), rope_inv_freq({.rotary_dim = 12}));
  auto xv = x.to_vector(), yv = y.to_vector();
  for (int64_t r = 0; r < 3 * 5 * 2; ++r)
    for (int i = 12; i < 20; ++i) EXPECT_EQ(yv[r * 20 + i], xv[r * 20 + i]);
}

TEST(Rope, PositionZeroIsIdentity) {
  Tensor x = random_tensor({1, 1, 4, 8}, 3);
  Tensor y = rope(x, positions_tensor({1}, 0, 0), rope_inv_freq({.rotary_dim = 8}));
  EXPECT_EQ(y.to_vector(), x.to_vector());
}

TEST(Rope, InplaceDecodeMatchesTensorOpBitwise) {
  const std::vector<float> inv = rope_inv_freq({.theta = 1e6f, .rotary_dim = 16});
  Tensor x = random_tensor({1, 1, 5, 24}, 4);
  Tensor y = rope(x, positions_tensor({1}, 4321, 0), inv);
  std::vector<float> buf = x.to_vector();
  rope_inplace(buf.data(), 5, 24, 4321, inv);
  EXPECT_EQ(buf, y.to_vector());
}

TEST(Rope, InvFreqDefaultAndLinear) {
  const auto inv = rope_inv_freq({.theta = 10000.f, .rotary_dim = 64});
  ASSERT_EQ(inv.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(inv[i], std::pow(10000.0, -2.0 * i / 64), 1e-7 * inv[i]) << i;
  const auto lin = rope_inv_freq({.rotary_dim = 64, .scaling = RopeScaling::kLinear, .factor = 4.f});
  for (int i = 0; i < 32; ++i) EXPECT_EQ(lin[i], inv[i] / 4.f);
}

TEST(Rope, InvFreqLlama3Bands) {
  // Llama 3.1 config: theta 5e5, factor 8, low 1, high 4, original 8192, head_dim 128.
  const RopeConfig cfg{.theta = 500000.f, .rotary_dim = 128, .scaling = RopeScaling::kLlama3, .factor = 8.f,
                       .low_freq_factor = 1.f, .high_freq_factor = 4.f, .original_max_position = 8192};
  const auto base = rope_inv_freq({.theta = 500000.f, .rotary_dim = 128});
  const auto inv = rope_inv_freq(cfg);
  int n_high = 0, n_low = 0, n_mid = 0;
  for (size_t i = 0; i < inv.size(); ++i) {
    const double wavelen = 2 * std::numbers::pi / base[i];
    if (wavelen < 2048) {  // high frequency: unchanged
      EXPECT_EQ(inv[i], base[i]);
      ++n_high;
    } else if (wavelen > 8192) {  // low frequency: divided by factor
      EXPECT_EQ(inv[i], base[i] / 8.f);
      ++n_low;
    } else {  // medium: the smooth interpolation, here evaluated independently in double
      const double smooth = (8192 / wavelen - 1) / 3;
      EXPECT_NEAR(inv[i], (1 - smooth) * base[i] / 8 + smooth * base[i], 1e-6 * base[i]) << i;
      ++n_mid;
    }
  }
  EXPECT_GT(n_high, 0);
  EXPECT_GT(n_low, 0);
  EXPECT_GT(n_mid, 0);
}

TEST(Rope, GradientMatchesFiniteDifferences) {
  // Linear in x, so central differences are exact up to f32 rounding of the weighted sum (~1e-6).
  const auto inv = rope_inv_freq({.rotary_dim = 6});
  Tensor pos = positions_tensor({2, 3}, 5, 3);
  std::vector<Tensor> in = {random_tensor({2, 3, 2, 10}, 5).set_requires_grad()};
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return rope(t[0], pos, inv); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

TEST(Rope, RejectsBadArguments) {
  const auto inv = rope_inv_freq({.rotary_dim = 8});
  EXPECT_THROW(rope(Tensor::zeros({1, 2, 1, 6}), positions_tensor({2}, 0, 1), inv), InvalidArgument);
  EXPECT_THROW(rope(Tensor::zeros({1, 2, 1, 8}), positions_tensor({3}, 0, 1), inv), InvalidArgument);
  EXPECT_THROW(rope_inv_freq({.rotary_dim = 7}), InvalidArgument);
}

}  // namespace
}  // namespace lathe
