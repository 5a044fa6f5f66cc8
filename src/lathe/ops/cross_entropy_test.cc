#include "lathe/ops/cross_entropy.h"

#include <gtest/gtest.h>

#include <random>

#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/softcap.h"
#include "lathe/ref/cross_entropy.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

std::vector<int32_t> random_labels(int64_t n, int32_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, v - 1);
  std::vector<int32_t> out(n);
  for (int32_t& l : out) l = dist(rng);
  return out;
}

// Per row: f32 max (exact), f32 Σ exp (each exp < 1 ulp; the sum's relative error, ≲ √V·2⁻²⁴ summed
// sequentially, becomes an absolute error of lse), one log; lse − z_label then carries ≈ 2⁻²³·(|lse| +
// |z|). Mean in double. Bound: 1e-6·(1 + |r|) + √V·6e-8.
void expect_matches_reference(int64_t n, int64_t v, float scale) {
  Tensor logits = random_tensor({n, v}, 1, scale);
  std::vector<int32_t> lab = random_labels(n, static_cast<int32_t>(v), 2);
  lab[n / 2] = -100;  // one ignored row
  const float loss = cross_entropy(logits, Tensor::from_data_i32({n}, lab)).item();
  const std::vector<float> lv = logits.to_vector();
  const double r = ref::cross_entropy(lv.data(), lab.data(), n, v, -100);
  EXPECT_NEAR(loss, r, 1e-6 * (1 + std::fabs(r)) + std::sqrt(double(v)) * 6e-8) << n << "x" << v;
}

TEST(CrossEntropy, MatchesReferenceAtOddSizes) {
  expect_matches_reference(5, 37, 1.f);
  expect_matches_reference(3, 1, 1.f);      // a one-word vocabulary: loss 0
  expect_matches_reference(7, 101, 30.f);   // peaked softmax: the max shift matters
  expect_matches_reference(4, 20001, 3.f);  // threaded rows (N·V > 64K)
}

TEST(CrossEntropy, ReturnsAScalarAndNanWhenAllRowsAreIgnored) {
  Tensor loss = cross_entropy(random_tensor({2, 5}, 1), Tensor::from_data_i32({2}, {1, 4}));
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(std::isnan(cross_entropy(random_tensor({2, 5}, 1), Tensor::from_data_i32({2}, {-100, -100})).item()));
  EXPECT_TRUE(std::isnan(cross_entropy(random_tensor({2, 5}, 1), Tensor::from_data_i32({2}, {7, 7}), 7).item()));
}

TEST(CrossEntropy, BadLabelNamesTheLabel) {
  try {
    cross_entropy(Tensor::zeros({2, 5}), Tensor::from_data_i32({2}, {1, 5}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("label 5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cross_entropy(Tensor::zeros({2, 5}), Tensor::from_data_i32({3}, {1, 1, 1})), InvalidArgument);
  EXPECT_THROW(cross_entropy(Tensor::zeros({10}), Tensor::from_data_i32({1}, {1})), InvalidArgument);
}

// Smooth in the logits. The loss is one f32 scalar, so the central difference carries its rounding
// 2⁻²⁴·|loss| / eps ≈ 1e-5 against gradients of ~1/(N·V): eps 5e-2 (truncation ~eps²·|f'''|/6 ≈ 1e-4
// relative at unit-scale logits) keeps both terms below 1e-3; bound 2e-3.
TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  std::vector<Tensor> in = {random_tensor({4, 7}, 1).set_requires_grad()};
  Tensor labels = Tensor::from_data_i32({4}, {3, -100, 0, 6});
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return cross_entropy(t[0], labels); }, in, 5e-2f);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
}

// The analytic rule at scale: (softmax − onehot)/count per row, zero on ignored rows. exp(x − lse) sees
// the f32 roundings of lse and of x − lse at |lse| ≈ 12 (≈ 3·2⁻²⁴·12 ≈ 2e-6 relative) and the error of
// the f32 Σ exp over V = 20001 terms (≈ √V·2⁻²⁴ ≈ 1e-5 when summed sequentially, as in unvectorised
// sanitizer builds; ~16x less with 16 SIMD lanes): bound 2e-5 relative.
TEST(CrossEntropy, ThreadedGradientEqualsSoftmaxMinusOnehot) {
  const int64_t n = 4, v = 20001;
  Tensor logits = random_tensor({n, v}, 1, 2.f).set_requires_grad();
  std::vector<int32_t> lab = random_labels(n, v, 2);
  lab[1] = -100;
  backward(cross_entropy(logits, Tensor::from_data_i32({n}, lab)));
  std::vector<float> d = logits.grad().to_vector(), x = logits.to_vector();
  for (int64_t i = 0; i < n; ++i) {
    const double lse = ref::logsumexp(x.data() + i * v, v);
    for (int64_t j = 0; j < v; j += 997) {
      const double want = lab[i] == -100 ? 0.0 : (std::exp(x[i * v + j] - lse) - (j == lab[i])) / 3.0;
      ASSERT_NEAR(d[i * v + j], want, 2e-5 * std::fabs(want) + 1e-12) << i << "," << j;
    }
    if (lab[i] != -100) {
      EXPECT_NEAR(d[i * v + lab[i]], (std::exp(x[i * v + lab[i]] - lse) - 1) / 3.0, 1e-7);
    }
  }
}

// ---- linear_cross_entropy ------------------------------------------------------------------------

struct LossAndGrads {
  float loss;
  std::vector<float> dh, dw;
};

// Runs fn(h, w) -> scalar loss with fresh leaves and returns the loss and both gradients.
template <class Fn>
LossAndGrads run_with_grads(const Tensor& h, const Tensor& w, Fn fn) {
  Tensor hr = h.clone().set_requires_grad(), wr = w.clone().set_requires_grad();
  Tensor loss = fn(hr, wr);
  const float value = loss.item();
  backward(loss);
  return {value, hr.grad().to_vector(), wr.grad().to_vector()};
}

// Fused vs unfused differ only in the log-sum-exp's f32 summation order (online chunks vs one pass):
// a few 2⁻²⁴·|lse| per row, so 1e-5 relative on the loss; gradients inherit it through exp(z − lse)
// and the GEMMs' f32 sums: bound 1e-5·max|g| per entry.
void expect_fused_equals_unfused(int64_t n, int64_t c, int64_t v, float cap, int64_t chunk, int64_t keep_bytes) {
  Tensor h = random_tensor({n, c}, 1, 1.5f), w = random_tensor({v, c}, 2);
  std::vector<int32_t> lab = random_labels(n, static_cast<int32_t>(v), 3);
  lab[0] = -100;
  Tensor labels = Tensor::from_data_i32({n}, lab);
  LossAndGrads fused = run_with_grads(h, w, [&](const Tensor& hr, const Tensor& wr) {
    return linear_cross_entropy(hr, wr, labels, {.final_softcap = cap, .chunk_size = chunk, .keep_logits_bytes = keep_bytes});
  });
  LossAndGrads unfused = run_with_grads(h, w, [&](const Tensor& hr, const Tensor& wr) {
    Tensor logits = linear(hr, wr);
    return cross_entropy(cap > 0.f ? softcap(logits, cap) : logits, labels);
  });
  const std::string where =
      "chunk " + std::to_string(chunk) + " cap " + std::to_string(cap) + " keep " + std::to_string(keep_bytes);
  EXPECT_NEAR(fused.loss, unfused.loss, 1e-5 * std::fabs(unfused.loss)) << where;
  for (auto [a, b] : {std::pair{&fused.dh, &unfused.dh}, std::pair{&fused.dw, &unfused.dw}}) {
    float scale = 0.f;
    for (float x : *b) scale = std::max(scale, std::fabs(x));
    for (size_t i = 0; i < a->size(); ++i) ASSERT_NEAR((*a)[i], (*b)[i], 1e-5 * scale) << where << " @" << i;
  }
}

TEST(LinearCrossEntropy, EqualsUnfusedCompositionForAnyChunking) {
  // keep_bytes 0: logits recomputed in the backward; 1 MiB: kept from the forward.
  for (int64_t keep : {int64_t{0}, int64_t{1} << 20})
    for (int64_t chunk : {1, 7, 16, 50, 4096}) expect_fused_equals_unfused(9, 13, 50, 0.f, chunk, keep);
}

TEST(LinearCrossEntropy, EqualsUnfusedCompositionWithFinalSoftcap) {
  for (int64_t keep : {int64_t{0}, int64_t{1} << 20})
    for (int64_t chunk : {7, 4096}) expect_fused_equals_unfused(9, 13, 50, 5.f, chunk, keep);
}

TEST(LinearCrossEntropy, EqualsUnfusedCompositionOnTheThreadedPath) {
  for (int64_t keep : {int64_t{0}, int64_t{1} << 20}) {
    expect_fused_equals_unfused(70, 16, 1000, 0.f, 1000, keep);  // N·chunk = 70K > the threading threshold
    expect_fused_equals_unfused(70, 16, 1000, 30.f, 333, keep);
  }
}

// Smooth; scalar f32 loss: eps 5e-2 as for cross_entropy (see above), bound 2e-3.
TEST(LinearCrossEntropy, GradientsMatchFiniteDifferences) {
  Tensor labels = Tensor::from_data_i32({4}, {3, -100, 0, 10});
  for (float cap : {0.f, 2.f}) {
    std::vector<Tensor> in = {random_tensor({4, 5}, 1).set_requires_grad(), random_tensor({11, 5}, 2).set_requires_grad()};
    auto r = gradcheck(
        [&](const std::vector<Tensor>& t) {
          return linear_cross_entropy(t[0], t[1], labels, {.final_softcap = cap, .chunk_size = 4});
        },
        in, 5e-2f);
    EXPECT_LT(r.max_rel_err, 2e-3) << "cap " << cap << "\n" << r.report;
  }
}

// A frozen bf16 head (LoRA fine-tuning of a bf16 checkpoint): same loss as the unfused bf16 linear, a
// hidden gradient, and no weight gradient.
TEST(LinearCrossEntropy, Bf16HeadGivesLossAndHiddenGradient) {
  Tensor h = random_tensor({5, 8}, 1), wb = random_tensor({21, 8}, 2).to(DType::kBF16);
  Tensor labels = Tensor::from_data_i32({5}, {0, 20, 3, 3, 7});
  Tensor hr = h.clone().set_requires_grad();
  Tensor loss = linear_cross_entropy(hr, wb, labels, {.chunk_size = 8});
  EXPECT_NEAR(loss.item(), cross_entropy(linear(h, wb), labels).item(), 1e-5 * std::fabs(loss.item()));
  backward(loss);
  EXPECT_TRUE(hr.grad().defined());
  Tensor wr = random_tensor({21, 8}, 2).to(DType::kBF16).set_requires_grad();
  EXPECT_THROW(linear_cross_entropy(h, wr, labels), InvalidArgument);
}

// A frozen f16 head (an f16 checkpoint's, e.g. tied to the embedding): the loss of the same values in f32,
// through the chunked head's f16 GEMMs (forward and, for dhidden, backward), and no weight gradient.
TEST(LinearCrossEntropy, F16HeadMatchesF32OnTheSameValues) {
  const Tensor h = random_tensor({5, 8}, 1), w16 = random_tensor({21, 8}, 2).to(DType::kF16), w32 = w16.to(DType::kF32);
  const Tensor labels = Tensor::from_data_i32({5}, {0, 20, 3, 3, 7});
  Tensor h16 = h.clone().set_requires_grad(), h32 = h.clone().set_requires_grad();
  Tensor loss16 = linear_cross_entropy(h16, w16, labels, {.chunk_size = 8});
  Tensor loss32 = linear_cross_entropy(h32, w32, labels, {.chunk_size = 8});
  EXPECT_NEAR(loss16.item(), loss32.item(), 1e-6 * std::fabs(loss32.item()));
  backward(loss16);
  backward(loss32);
  const auto g = h16.grad().to_vector(), g_want = h32.grad().to_vector();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], g_want[i], 1e-6 * (1 + std::fabs(g_want[i]))) << i;
  EXPECT_THROW(linear_cross_entropy(h, w16.clone().set_requires_grad(), labels), InvalidArgument);
}

TEST(LinearCrossEntropy, RejectsBadArguments) {
  Tensor h = Tensor::zeros({2, 4}), w = Tensor::zeros({6, 4});
  EXPECT_THROW(linear_cross_entropy(h, Tensor::zeros({6, 5}), Tensor::from_data_i32({2}, {0, 1})), InvalidArgument);
  EXPECT_THROW(linear_cross_entropy(h, w, Tensor::from_data_i32({2}, {0, 6})), InvalidArgument);
  EXPECT_THROW(linear_cross_entropy(h, w, Tensor::from_data_i32({2}, {0, 1}), {.chunk_size = 0}), InvalidArgument);
  EXPECT_TRUE(std::isnan(linear_cross_entropy(h, w, Tensor::from_data_i32({2}, {-100, -100})).item()));
}

}  // namespace
}  // namespace lathe
