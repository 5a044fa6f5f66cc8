#include "lathe/ops/logprob.h"

#include <gtest/gtest.h>

#include <random>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/logprob.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

// Same arithmetic as cross_entropy's per-row loss (see cross_entropy_test): 1e-6·(1 + |r|) + √V·6e-8.
TEST(TokenLogprobs, MatchesReferenceWithLeadingDims) {
  for (auto [b, t, v] : {std::tuple<int64_t, int64_t, int64_t>{2, 3, 37}, {1, 5, 1}, {2, 2, 20011}}) {
    Tensor logits = random_tensor({b, t, v}, 1, 4.f);
    std::mt19937 rng(3);
    std::vector<int32_t> ids(b * t);
    for (int32_t& id : ids) id = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(v) - 1)(rng);
    Tensor out = token_logprobs(logits, Tensor::from_data_i32({b, t}, ids));
    ASSERT_EQ(out.shape(), (Shape{b, t}));
    std::vector<float> lv = logits.to_vector(), ov = out.to_vector();
    std::vector<double> r(b * t);
    ref::token_logprobs(lv.data(), ids.data(), b * t, v, r.data());
    for (int64_t i = 0; i < b * t; ++i) EXPECT_NEAR(ov[i], r[i], 1e-6 * (1 + std::fabs(r[i])) + std::sqrt(double(v)) * 6e-8) << v << " @" << i;
  }
}

TEST(TokenLogprobs, OutOfRangeIdNamesTheId) {
  try {
    token_logprobs(Tensor::zeros({2, 5}), Tensor::from_data_i32({2}, {0, 99}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(token_logprobs(Tensor::zeros({2, 5}), Tensor::from_data_i32({3}, {0, 0, 0})), InvalidArgument);
}

// Smooth; the outputs are O(1) log-probabilities: eps 1e-2 central differences (truncation ~1e-5,
// f32 output rounding ~2e-5 relative): 1e-3.
TEST(TokenLogprobs, GradientMatchesFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({3, 6}, 1).set_requires_grad()};
  Tensor ids = Tensor::from_data_i32({3}, {5, 0, 2});
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return token_logprobs(t[0], ids); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

}  // namespace
}  // namespace lathe
