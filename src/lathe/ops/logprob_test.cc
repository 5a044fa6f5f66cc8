#include "lathe/ops/logprob.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "lathe/ops/cast.h"
#include "lathe/ops/cross_entropy.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/softcap.h"
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

// ---- linear_token_logprobs ----------------------------------------------------------------------

std::vector<int32_t> random_targets(int64_t n, int64_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& id : t) id = std::uniform_int_distribution<int32_t>(0, static_cast<int32_t>(v) - 1)(rng);
  return t;
}

float max_abs(const Tensor& t) {
  float m = 0.f;
  for (float x : t.to_vector()) m = std::max(m, std::fabs(x));
  return m;
}

struct HeadCase {
  int64_t n, c, v;
  float cap;
  int64_t chunk;
};

// Against the double reference: each logit is an f32 sum of C products, off by at most
// C·2⁻²⁴·max|h|·max|w| (x2 margin); log p_t moves by at most twice that (z_t and lse), H by that times
// Σ_j p_j·|log p_j + H| ≤ 1 + 2·log V (its derivative); plus the f32 log-sum-exp rounding of the
// token_logprobs test, 1e-6·(1 + |r|) + √V·6e-8.
TEST(LinearTokenLogprobs, MatchesScalarReference) {
  for (const HeadCase& k : {HeadCase{9, 13, 50, 0.f, 7}, HeadCase{9, 13, 50, 5.f, 16}, HeadCase{1, 8, 37, 0.f, 5},
                            HeadCase{70, 16, 1000, 30.f, 333}, HeadCase{3, 4, 1, 0.f, 4096}}) {
    Tensor h = random_tensor({k.n, k.c}, 1, 1.5f), w = random_tensor({k.v, k.c}, 2);
    std::vector<int32_t> t = random_targets(k.n, k.v, 3);
    if (k.n > 1) t[1] = -100;
    TokenLogprobs out = linear_token_logprobs(h, w, Tensor::from_data_i32({k.n}, t),
                                              {.final_softcap = k.cap, .want_entropy = true, .chunk_size = k.chunk});
    ASSERT_EQ(out.logprobs.shape(), (Shape{k.n}));
    ASSERT_EQ(out.entropy.shape(), (Shape{k.n}));
    std::vector<float> hv = h.to_vector(), wv = w.to_vector(), lp = out.logprobs.to_vector(), ent = out.entropy.to_vector();
    std::vector<double> rlp(k.n), rent(k.n);
    ref::linear_token_logprobs(hv.data(), wv.data(), t.data(), k.n, k.c, k.v, k.cap, -100, rlp.data(), rent.data());
    const double logit_tol = 2.0 * k.c * 0x1p-24 * max_abs(h) * max_abs(w);
    const std::string where = std::to_string(k.n) + "x" + std::to_string(k.v) + " cap " + std::to_string(k.cap);
    for (int64_t i = 0; i < k.n; ++i) {
      const double round = std::sqrt(double(k.v)) * 6e-8;
      EXPECT_NEAR(lp[i], rlp[i], 2 * logit_tol + 1e-6 * (1 + std::fabs(rlp[i])) + round) << where << " @" << i;
      EXPECT_NEAR(ent[i], rent[i], logit_tol * (1 + 2 * std::log(double(k.v))) + 1e-6 * (1 + rent[i]) + round)
          << where << " @" << i;
    }
    if (k.n > 1) {
      EXPECT_EQ(lp[1], 0.f) << "ignored row";
    }
  }
}

// Fused vs token_logprobs(linear(h, w)) (soft-capped when cap > 0), values and the gradients for a
// random upstream g: the same arithmetic up to the f32 summation order of the log-sum-exp (online chunks
// vs one pass) and the GEMMs' blocking: 1e-5 relative, as linear_cross_entropy's fused/unfused test.
void expect_fused_equals_unfused(const HeadCase& k, int64_t keep_bytes) {
  Tensor h = random_tensor({k.n, k.c}, 1, 1.5f), w = random_tensor({k.v, k.c}, 2);
  const Tensor t = Tensor::from_data_i32({k.n}, random_targets(k.n, k.v, 3));
  const Tensor g = random_tensor({k.n}, 4);
  Tensor hf = h.clone().set_requires_grad(), wf = w.clone().set_requires_grad();
  Tensor fused = linear_token_logprobs(
      hf, wf, t, {.final_softcap = k.cap, .chunk_size = k.chunk, .keep_logits_bytes = keep_bytes}).logprobs;
  backward(fused, g);
  Tensor hu = h.clone().set_requires_grad(), wu = w.clone().set_requires_grad();
  Tensor logits = linear(hu, wu);
  Tensor unfused = token_logprobs(k.cap > 0.f ? softcap(logits, k.cap) : logits, t);
  backward(unfused, g);
  const std::string where = "chunk " + std::to_string(k.chunk) + " cap " + std::to_string(k.cap) + " keep " +
                            std::to_string(keep_bytes);
  const std::vector<float> a = fused.to_vector(), b = unfused.to_vector();
  for (int64_t i = 0; i < k.n; ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1 + std::fabs(b[i]))) << where << " @" << i;
  for (auto [x, y] : {std::pair{hf.grad(), hu.grad()}, std::pair{wf.grad(), wu.grad()}}) {
    const std::vector<float> xv = x.to_vector(), yv = y.to_vector();
    const float scale = max_abs(y);
    for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(xv[i], yv[i], 1e-5 * scale) << where << " @" << i;
  }
}

TEST(LinearTokenLogprobs, EqualsUnfusedCompositionForAnyChunking) {
  for (int64_t keep : {int64_t{0}, int64_t{1} << 20}) {
    for (int64_t chunk : {1, 7, 16, 50, 4096}) expect_fused_equals_unfused({9, 13, 50, 0.f, chunk}, keep);
    expect_fused_equals_unfused({9, 13, 50, 5.f, 7}, keep);
    expect_fused_equals_unfused({1, 13, 50, 5.f, 16}, keep);       // N = 1
    expect_fused_equals_unfused({70, 16, 1000, 30.f, 333}, keep);  // threaded rows, V % chunk != 0
  }
}

// −mean of the counted rows' log-probs is the cross-entropy of the same head (same chunk arithmetic).
TEST(LinearTokenLogprobs, AgreesWithLinearCrossEntropy) {
  Tensor h = random_tensor({12, 10}, 5), w = random_tensor({77, 10}, 6);
  std::vector<int32_t> t = random_targets(12, 77, 7);
  t[3] = t[8] = -100;
  const Tensor targets = Tensor::from_data_i32({12}, t);
  const std::vector<float> lp = linear_token_logprobs(h, w, targets, {.final_softcap = 3.f, .chunk_size = 9}).logprobs.to_vector();
  double mean = 0;
  for (int64_t i = 0; i < 12; ++i) mean -= lp[i] / 10.0;
  EXPECT_NEAR(mean, linear_cross_entropy(h, w, targets, {.final_softcap = 3.f, .chunk_size = 9}).item(), 1e-6 * std::fabs(mean));
}

// Smooth; O(1) outputs: eps 1e-2 central differences, bound 1e-3 (as token_logprobs above). The third
// output (log p + 0.5·H) sends gradients down both outputs into one fused backward.
TEST(LinearTokenLogprobs, GradientsMatchFiniteDifferences) {
  const Tensor targets = Tensor::from_data_i32({4}, {3, -100, 0, 10});
  for (float cap : {0.f, 2.f}) {
    for (int which : {0, 1, 2}) {
      std::vector<Tensor> in = {random_tensor({4, 5}, 1).set_requires_grad(),
                                random_tensor({11, 5}, 2).set_requires_grad()};
      auto r = gradcheck(
          [&](const std::vector<Tensor>& x) {
            TokenLogprobs o = linear_token_logprobs(x[0], x[1], targets,
                                                    {.final_softcap = cap, .want_entropy = true, .chunk_size = 4});
            if (which == 0) return o.logprobs;
            if (which == 1) return o.entropy;
            return add(o.logprobs, scale(o.entropy, 0.5f));
          },
          in);
      EXPECT_LT(r.max_rel_err, 1e-3) << "cap " << cap << " output " << which << "\n" << r.report;
    }
  }
}

// The sampler's processed distribution (temperature, top-k, top-p over the survivors; LogprobProcessing) against
// the double reference on the same f32 logits (the unfused head, soft-capped): the head's f32 logits are the
// ones both see, so only the log-sum-exp rounding is left: 1e-5·(1 + |r|). Targets include tokens outside the
// kept set (they join it) and every chunking, with and without the second pass of top-p alone.
TEST(LinearTokenLogprobs, ProcessedMatchesTheSamplersDistribution) {
  const int64_t n = 12, c = 8, v = 61;
  Tensor h = random_tensor({n, c}, 11, 1.5f), w = random_tensor({v, c}, 12);
  std::vector<int32_t> t = random_targets(n, v, 13);
  t[4] = -100;
  for (float cap : {0.f, 4.f}) {
    const Tensor logits = cap > 0.f ? softcap(linear(h, w), cap) : linear(h, w);
    const std::vector<float> zf = logits.to_vector();
    // Each row's best token as the target of row 0 (always kept), the rest random (often cut by top-k / top-p).
    t[0] = static_cast<int32_t>(std::max_element(zf.begin(), zf.begin() + v) - zf.begin());
    const Tensor targets = Tensor::from_data_i32({n}, t);
    for (const LogprobProcessing pr : {LogprobProcessing{.temperature = 0.7f}, LogprobProcessing{.top_k = 5},
                                       LogprobProcessing{.temperature = 1.3f, .top_p = 0.8f},
                                       LogprobProcessing{.temperature = 0.6f, .top_k = 9, .top_p = 0.75f},
                                       LogprobProcessing{.temperature = 2.f, .top_k = 200, .top_p = 0.3f}}) {
      for (int64_t chunk : {int64_t{7}, int64_t{16}, int64_t{61}}) {
        const TokenLogprobs out = linear_token_logprobs(
            h, w, targets, {.final_softcap = cap, .want_entropy = true, .chunk_size = chunk, .processing = pr});
        const std::vector<float> lp = out.logprobs.to_vector(), ent = out.entropy.to_vector();
        const std::string where = "T " + std::to_string(pr.temperature) + " k " + std::to_string(pr.top_k) + " p " +
                                  std::to_string(pr.top_p) + " cap " + std::to_string(cap) + " chunk " +
                                  std::to_string(chunk);
        for (int64_t i = 0; i < n; ++i) {
          if (t[i] == -100) {
            EXPECT_EQ(lp[i], 0.f) << where;
            continue;
          }
          std::vector<double> z(zf.begin() + i * v, zf.begin() + (i + 1) * v);
          double rlp = 0, rent = 0;
          ref::processed_token_logprob(z.data(), v, t[i], pr.temperature, pr.top_k, pr.top_p, &rlp, &rent);
          EXPECT_NEAR(lp[i], rlp, 1e-5 * (1 + std::fabs(rlp))) << where << " @" << i;
          EXPECT_NEAR(ent[i], rent, 1e-5 * (1 + rent)) << where << " @" << i;
        }
      }
    }
  }
}

// The kept set is constant for the gradient, so the processed outputs are smooth away from ties: central
// differences with eps 1e-3 (a perturbation of the logits far below their gaps here), bound 1e-3 as above.
TEST(LinearTokenLogprobs, ProcessedGradientsMatchFiniteDifferences) {
  const Tensor targets = Tensor::from_data_i32({4}, {3, -100, 0, 10});
  for (const LogprobProcessing pr : {LogprobProcessing{.temperature = 0.7f},
                                     LogprobProcessing{.temperature = 1.5f, .top_k = 4, .top_p = 0.9f},
                                     LogprobProcessing{.top_p = 0.7f}}) {
    for (float cap : {0.f, 2.f}) {
      std::vector<Tensor> in = {random_tensor({4, 5}, 1).set_requires_grad(),
                                random_tensor({11, 5}, 2).set_requires_grad()};
      auto r = gradcheck(
          [&](const std::vector<Tensor>& x) {
            TokenLogprobs o = linear_token_logprobs(
                x[0], x[1], targets, {.final_softcap = cap, .want_entropy = true, .chunk_size = 4, .processing = pr});
            return add(o.logprobs, scale(o.entropy, 0.5f));
          },
          in, 1e-3f);
      EXPECT_LT(r.max_rel_err, 1e-3) << "T " << pr.temperature << " k " << pr.top_k << " p " << pr.top_p << " cap "
                                     << cap << "\n" << r.report;
    }
  }
}

TEST(LinearTokenLogprobs, IsDeterministicAndKeepingLogitsChangesNothing) {
  Tensor h = random_tensor({40, 24}, 1), w = random_tensor({3001, 24}, 2);
  const Tensor t = Tensor::from_data_i32({40}, random_targets(40, 3001, 3));
  std::vector<std::vector<float>> runs;
  for (int64_t keep : {int64_t{0}, int64_t{0}, int64_t{1} << 30}) {
    Tensor hr = h.clone().set_requires_grad(), wr = w.clone().set_requires_grad();
    TokenLogprobs o = linear_token_logprobs(hr, wr, t, {.want_entropy = true, .chunk_size = 512, .keep_logits_bytes = keep});
    backward(add(o.logprobs, o.entropy), Tensor::full({40}, 1.f));
    std::vector<float> all = o.logprobs.to_vector(), e = o.entropy.to_vector(), dh = hr.grad().to_vector(),
                       dw = wr.grad().to_vector();
    for (const auto* part : {&e, &dh, &dw}) all.insert(all.end(), part->begin(), part->end());
    runs.push_back(all);
  }
  for (size_t r = 1; r < runs.size(); ++r)
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[r].data(), runs[0].size() * sizeof(float)), 0) << "run " << r;
}

// bf16 compute (to_bf16 hidden, bf16_compute_weight copy) against the f32 op on the same rounded values:
// f32 sums of C products in another order at most (the tolerance of cast_test's fused-head test).
TEST(LinearTokenLogprobs, Bf16ComputeMatchesTheF32PathOnTheRoundedValues) {
  const int64_t N = 11, C = 24, V = 45;
  Tensor h = random_tensor({N, C}, 7).set_requires_grad(), w = random_tensor({V, C}, 8).set_requires_grad();
  Tensor copy = w.detach().to(DType::kBF16);
  std::vector<int32_t> t = random_targets(N, V, 9);
  t[4] = -100;
  const Tensor targets = Tensor::from_data_i32({N}, t);
  const LinearTokenLogprobsOptions o{.want_entropy = true, .chunk_size = 16};
  TokenLogprobs got = linear_token_logprobs(to_bf16(h), bf16_compute_weight(w, copy), targets, o);
  backward(add(got.logprobs, got.entropy), Tensor::full({N}, 1.f));
  Tensor hr = to_bf16(h).detach().to(DType::kF32).set_requires_grad(), wr = copy.to(DType::kF32).set_requires_grad();
  TokenLogprobs want = linear_token_logprobs(hr, wr, targets, o);
  backward(add(want.logprobs, want.entropy), Tensor::full({N}, 1.f));
  const double tol = 4.0 * std::max(C, N) * 0x1p-23 * std::pow(std::max(max_abs(h), max_abs(w)), 2);
  for (auto [a, b] : {std::pair{got.logprobs, want.logprobs}, std::pair{got.entropy, want.entropy},
                      std::pair{h.grad(), hr.grad()}, std::pair{w.grad(), wr.grad()}}) {
    const std::vector<float> av = a.to_vector(), bv = b.to_vector();
    ASSERT_EQ(av.size(), bv.size());
    for (size_t i = 0; i < av.size(); ++i) ASSERT_NEAR(av[i], bv[i], tol) << i;
  }
}

TEST(LinearTokenLogprobs, RejectsBadArguments) {
  const Tensor h = Tensor::zeros({2, 4}), w = Tensor::zeros({6, 4}), ok = Tensor::from_data_i32({2}, {0, 5});
  try {
    linear_token_logprobs(h, w, Tensor::from_data_i32({2}, {0, 6}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("target 6"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linear_token_logprobs(h, w, Tensor::from_data_i32({2}, {-1, 0})), InvalidArgument);  // not ignore_index
  EXPECT_THROW(linear_token_logprobs(h, w, Tensor::from_data_i32({3}, {0, 0, 0})), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, Tensor::zeros({2})), InvalidArgument);  // f32 targets
  EXPECT_THROW(linear_token_logprobs(h, Tensor::zeros({6, 5}), ok), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, ok, {.chunk_size = 0}), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, ok, {.final_softcap = -1.f}), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, ok, {.processing = {.temperature = 0.f}}), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, ok, {.processing = {.top_k = -1}}), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h, w, ok, {.processing = {.top_p = 0.f}}), InvalidArgument);
  EXPECT_THROW(linear_token_logprobs(h.to(DType::kBF16), w, ok), InvalidArgument);  // bf16 hidden, f32 weight
  Tensor leaf = w.to(DType::kBF16).set_requires_grad();  // a bf16 leaf cannot hold a gradient
  EXPECT_THROW(linear_token_logprobs(h, leaf, ok), InvalidArgument);
  // A custom ignore_index: that row gives 0 and -100 becomes an invalid target.
  EXPECT_EQ(linear_token_logprobs(h, w, Tensor::from_data_i32({2}, {7, 1}), {.ignore_index = 7}).logprobs.to_vector()[0], 0.f);
  EXPECT_THROW(linear_token_logprobs(h, w, Tensor::from_data_i32({2}, {-100, 1}), {.ignore_index = 7}), InvalidArgument);
}

}  // namespace
}  // namespace lathe
