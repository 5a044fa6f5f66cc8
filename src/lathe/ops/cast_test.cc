// bf16 compute pieces: stochastic rounding (unbiased, deterministic per key), and linear /
// linear_cross_entropy with bf16 inputs and a bf16 compute copy against references on the same rounded values.
#include "lathe/ops/cast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/ops/cross_entropy.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ref/gemm.h"

namespace lathe {
namespace {

using testing::random_tensor;

float widen(bf16 h) { return bf16_to_f32(h); }
float rne(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// The bf16 neighbours of x around zero: lo = x truncated toward zero, hi = the next one away from zero.
std::pair<float, float> neighbours(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bf16 lo{static_cast<uint16_t>(u >> 16)}, hi{static_cast<uint16_t>((u >> 16) + 1)};
  return {widen(lo), widen(hi)};
}

TEST(StochasticRoundBf16, IsUnbiasedAndHitsBothNeighboursWithTheRightFrequency) {
  constexpr int64_t kN = 1 << 18;
  for (const float x : {1.0f + 0.3f * 0x1p-7f, -3.7f, 0.0123456f, 1e-30f, -2.0f + 0.9f * 0x1p-6f}) {
    const auto [lo, hi] = neighbours(x);
    const double p_hi = (static_cast<double>(x) - lo) / (static_cast<double>(hi) - lo);  // distance from lo
    Tensor src = Tensor::full({kN}, x), dst = Tensor::empty({kN}, DType::kBF16);
    stochastic_round_bf16(src, dst, 77);
    int64_t n_hi = 0;
    double sum = 0;
    for (int64_t i = 0; i < kN; ++i) {
      const float r = widen(dst.data<bf16>()[i]);
      ASSERT_TRUE(r == lo || r == hi) << x << " -> " << r;
      n_hi += r == hi;
      sum += r;
    }
    // Binomial: the hit frequency is within 5 standard deviations of p_hi (fails ~1 in 1.7M runs), and so
    // is the mean of the draws around x (its standard deviation is |hi − lo|·σ_freq).
    const double sigma = std::sqrt(p_hi * (1 - p_hi) / kN);
    EXPECT_NEAR(static_cast<double>(n_hi) / kN, p_hi, 5 * sigma + 1e-12) << x;
    EXPECT_NEAR(sum / kN, x, 5 * sigma * std::abs(hi - lo) + 1e-45) << x;
  }
}

TEST(StochasticRoundBf16, IsDeterministicPerKeyExactOnBf16ValuesAndThreadCountFree) {
  const Tensor src = random_tensor({1001}, 4);  // odd length: a last group of one element
  Tensor a = Tensor::empty({1001}, DType::kBF16), b = Tensor::empty({1001}, DType::kBF16),
         c = Tensor::empty({1001}, DType::kBF16);
  stochastic_round_bf16(src, a, 9);
  {
    Context one(1);
    ContextScope scope(one);
    stochastic_round_bf16(src, b, 9);
  }
  stochastic_round_bf16(src, c, 10);
  int64_t differ = 0;
  for (int64_t i = 0; i < 1001; ++i) {
    EXPECT_EQ(a.data<bf16>()[i].bits, b.data<bf16>()[i].bits) << i;
    differ += a.data<bf16>()[i].bits != c.data<bf16>()[i].bits;
  }
  EXPECT_GT(differ, 100) << "another key should round many elements the other way";
  // A value bf16 already holds has no dropped bits: it never moves, nor do ±inf, and NaN stays NaN.
  Tensor exact = Tensor::from_data({4}, {rne(0.3f), -rne(1234.5f), INFINITY, -INFINITY});
  Tensor e = Tensor::empty({4}, DType::kBF16);
  for (uint64_t key = 0; key < 50; ++key) {
    stochastic_round_bf16(exact, e, key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(widen(e.data<bf16>()[i]), exact.data<float>()[i]);
  }
  Tensor nan = Tensor::full({3}, NAN), en = Tensor::empty({3}, DType::kBF16);
  stochastic_round_bf16(nan, en, 1);
  EXPECT_TRUE(std::isnan(widen(en.data<bf16>()[2])));
}

// to_bf16 of an op's output takes over that op's gradient rule: the f32 output is freed as soon as the
// caller drops it (the bf16 copy replaces it in memory) and the gradient still reaches the op's input.
TEST(ToBf16, FreesTheF32InputOfARecordedOpAndKeepsItsGradient) {
  Tensor x = random_tensor({6, 10}, 3).set_requires_grad();
  Tensor y = scale(x, 3.f);  // [6, 10] f32, recorded
  const std::weak_ptr<Storage> y_storage = y.storage();
  Tensor b = to_bf16(y);
  for (int64_t i = 0; i < 60; ++i) EXPECT_EQ(widen(b.data<bf16>()[i]), rne(y.data<float>()[i]));
  y = Tensor();
  EXPECT_TRUE(y_storage.expired()) << "the graph still holds the f32 tensor";
  const Tensor g = random_tensor({6, 10}, 4);
  backward(b, g);
  ASSERT_TRUE(x.grad().defined());
  for (int64_t i = 0; i < 60; ++i) EXPECT_FLOAT_EQ(x.grad().data<float>()[i], 3.f * g.data<float>()[i]);
  // A leaf input: straight through.
  Tensor leaf = random_tensor({4}, 5).set_requires_grad();
  backward(to_bf16(leaf), Tensor::full({4}, 2.f));
  EXPECT_EQ(leaf.grad().to_vector(), std::vector<float>(4, 2.f));
}

double max_abs(std::initializer_list<Tensor> ts) {
  double m = 0;
  for (const Tensor& t : ts)
    for (float v : t.to_vector()) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

// backward of Σ y·g for a given g.
void backward_with(const Tensor& y, const Tensor& g) { backward(y, g); }

TEST(LinearBf16, ForwardAndBackwardMatchTheScalarReferenceOnTheRoundedValues) {
  const int64_t N = 13, K = 37, M = 19;
  Tensor x = random_tensor({N, K}, 1).set_requires_grad();
  Tensor w = random_tensor({M, K}, 2).set_requires_grad();  // the f32 master
  Tensor b = random_tensor({M}, 3).set_requires_grad();
  Tensor copy = Tensor::empty({M, K}, DType::kBF16);
  stochastic_round_bf16(w, copy, 5);
  Tensor y = linear(to_bf16(x), bf16_compute_weight(w, copy), b);
  ASSERT_EQ(y.dtype(), DType::kF32);
  const Tensor g = random_tensor({N, M}, 6);
  backward_with(y, g);

  // Reference: double sums over exactly the bf16 values the kernel read (x rounded to nearest, the copy).
  std::vector<float> xr(N * K), wr(M * K);
  for (int64_t i = 0; i < N * K; ++i) xr[i] = rne(x.data<float>()[i]);
  for (int64_t i = 0; i < M * K; ++i) wr[i] = widen(copy.data<bf16>()[i]);
  const auto id = [](float v) { return v; };
  std::vector<float> y_ref(N * M), dx_ref(N * K), dw_ref(M * K);
  ref::gemm(false, true, N, M, K, 1.f, xr.data(), K, wr.data(), K, 0.f, y_ref.data(), M, id);
  ref::gemm(false, false, N, K, M, 1.f, g.data<float>(), M, wr.data(), K, 0.f, dx_ref.data(), K, id);
  ref::gemm(true, false, M, K, N, 1.f, g.data<float>(), M, xr.data(), K, 0.f, dw_ref.data(), K, id);
  // f32 sums of up to max(K, N, M) products (STYLE §10): 4·len·eps_f32·max|a|·max|b|, with every
  // operand bounded by the largest input magnitude.
  const double tol = 4.0 * std::max({K, N, M}) * 0x1p-23 * std::pow(max_abs({x, w, g}), 2);
  double moved = 0;  // how far the f32 product is from the bf16 one: must exceed tol, else the test is blind
  const Tensor y32 = [&] {
    NoGradGuard ng;
    return linear(x, w, b);
  }();
  for (int64_t i = 0; i < N * M; ++i) {
    EXPECT_NEAR(y.data<float>()[i], y_ref[i] + b.data<float>()[i % M], tol) << i;
    moved = std::max(moved, std::abs(static_cast<double>(y32.data<float>()[i]) - y.data<float>()[i]));
  }
  EXPECT_GT(moved, 20 * tol) << "bf16 rounding had no visible effect";
  ASSERT_TRUE(x.grad().defined() && w.grad().defined() && b.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::kF32);
  EXPECT_FALSE(copy.grad().defined()) << "the gradient belongs to the f32 master";
  for (int64_t i = 0; i < N * K; ++i) EXPECT_NEAR(x.grad().data<float>()[i], dx_ref[i], tol) << i;
  for (int64_t i = 0; i < M * K; ++i) EXPECT_NEAR(w.grad().data<float>()[i], dw_ref[i], tol) << i;
  for (int64_t o = 0; o < M; ++o) {
    double db = 0;
    for (int64_t r = 0; r < N; ++r) db += g.data<float>()[r * M + o];
    EXPECT_NEAR(b.grad().data<float>()[o], db, tol) << o;
  }
  // A bf16 leaf weight cannot take a gradient (it would need a bf16 gradient): only a compute copy can.
  Tensor leaf = copy.clone().set_requires_grad();
  EXPECT_THROW(linear(to_bf16(x), leaf), InvalidArgument);
  EXPECT_THROW(linear(to_bf16(x), w), InvalidArgument) << "bf16 input with an f32 weight";
}

TEST(LinearBf16, FusedHeadLossMatchesTheF32PathOnTheRoundedValues) {
  const int64_t N = 11, C = 24, V = 45;
  Tensor h = random_tensor({N, C}, 7).set_requires_grad();
  Tensor w = random_tensor({V, C}, 8).set_requires_grad();
  Tensor copy = Tensor::empty({V, C}, DType::kBF16);
  stochastic_round_bf16(w, copy, 3);
  std::vector<int32_t> lab(N);
  for (int64_t i = 0; i < N; ++i) lab[i] = static_cast<int32_t>((i * 7) % V);
  lab[4] = -100;  // one ignored row
  const Tensor labels = Tensor::from_data_i32({N}, lab);
  LinearCrossEntropyOptions o;
  o.chunk_size = 16;  // several chunks, the last one partial
  for (const int64_t keep : {int64_t{0}, int64_t{1} << 20}) {  // recomputed and kept logits
    o.keep_logits_bytes = keep;
    h.zero_grad();
    w.zero_grad();
    Tensor loss = linear_cross_entropy(to_bf16(h), bf16_compute_weight(w, copy), labels, o);
    backward(loss);
    // Reference: the f32 op (tested against its scalar reference) on the same rounded values.
    Tensor hr = to_bf16(h).detach().to(DType::kF32).set_requires_grad();
    Tensor wr = copy.to(DType::kF32).set_requires_grad();
    Tensor loss_ref = linear_cross_entropy(hr, wr, labels, o);
    backward(loss_ref);
    // f32 sums of C products (and the loss's sum over N rows) in another order at most; the logit
    // gradients are probabilities, at most 1 in magnitude.
    const double tol = 4.0 * std::max(C, N) * 0x1p-23 * std::pow(max_abs({h, w}), 2);
    EXPECT_NEAR(loss.item(), loss_ref.item(), tol);
    for (int64_t i = 0; i < N * C; ++i) EXPECT_NEAR(h.grad().data<float>()[i], hr.grad().data<float>()[i], tol) << i;
    for (int64_t i = 0; i < V * C; ++i) EXPECT_NEAR(w.grad().data<float>()[i], wr.grad().data<float>()[i], tol) << i;
  }
}

}  // namespace
}  // namespace lathe
