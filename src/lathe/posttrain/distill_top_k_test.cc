// Top-k distillation (specs/posttrain.md §6, Tunix distill_top_k): the loss against a plain computation of the
// formula written here (sort the teacher's logits, softmax both sides over its k largest, the divergence by its
// definition), for every divergence with k < V and k = V; k = V equals the full-vocabulary loss; the top-k
// selection; finite-difference gradients of the row and of the chunked head (zero off the teacher's top-k);
// a teacher given as cached ids and logits equals the live teacher.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lathe/base/rng.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/posttrain/distill_loss.h"
#include "lathe/posttrain/distill_options.h"

namespace lathe::posttrain {
namespace {

std::vector<float> random_row(int64_t v, uint64_t seed, float spread) {
  CounterRng rng{.key = seed};
  std::vector<float> z(static_cast<size_t>(v));
  for (float& x : z) x = spread * (static_cast<float>(rng.next_below(1u << 20)) / (1u << 20) - 0.5f);
  return z;
}

// The formula, plainly: S = the k ids of the largest teacher logits, p and q softmaxes over S at temperature T,
// then D by definition (TRL: JSD β = 0 is forward KL, β = 1 reverse KL).
double plain_top_k_divergence(const std::vector<float>& zs, const std::vector<float>& zt, int64_t k, Divergence d,
                              double beta, double T) {
  std::vector<int64_t> order(zt.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return zt[a] > zt[b]; });
  std::vector<double> p(static_cast<size_t>(k)), q(static_cast<size_t>(k));
  double sp = 0, sq = 0;
  for (int64_t j = 0; j < k; ++j) {
    p[j] = std::exp(zt[order[j]] / T);
    q[j] = std::exp(zs[order[j]] / T);
    sp += p[j];
    sq += q[j];
  }
  for (int64_t j = 0; j < k; ++j) {
    p[j] /= sp;
    q[j] /= sq;
  }
  if (d == Divergence::kJsd && beta == 0) d = Divergence::kForwardKl;
  if (d == Divergence::kJsd && beta == 1) d = Divergence::kReverseKl;
  double D = 0;
  for (int64_t j = 0; j < k; ++j) {
    if (d == Divergence::kForwardKl) D += p[j] * std::log(p[j] / q[j]);
    if (d == Divergence::kReverseKl) D += q[j] * std::log(q[j] / p[j]);
    if (d == Divergence::kJsd) {
      const double m = beta * p[j] + (1 - beta) * q[j];
      D += beta * p[j] * std::log(p[j] / m) + (1 - beta) * q[j] * std::log(q[j] / m);
    }
  }
  return D;
}

struct Case {
  Divergence d;
  double beta;
};
const Case kCases[] = {{Divergence::kForwardKl, 0.5}, {Divergence::kReverseKl, 0.5}, {Divergence::kJsd, 0.0},
                       {Divergence::kJsd, 0.3},       {Divergence::kJsd, 0.5},       {Divergence::kJsd, 1.0}};

TEST(DistillTopK, SelectsTheLargestLogitsLargestFirstTiesToTheSmallerId) {
  const std::vector<float> z = {0.5f, 2.f, -1.f, 2.f, NAN, 1.f};
  std::vector<int32_t> ids(4);
  std::vector<float> top(4);
  teacher_top_k(z.data(), 6, 4, ids.data(), top.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 5, 0}));
  EXPECT_EQ(top, (std::vector<float>{2.f, 2.f, 1.f, 0.5f}));
  EXPECT_THROW(teacher_top_k(z.data(), 6, 7, ids.data(), top.data()), InvalidArgument);
}

TEST(DistillTopK, RowMatchesThePlainFormula) {
  const int64_t V = 13;
  const double T = 1.7;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const std::vector<float> zs = random_row(V, 10 + seed, 6.f), zt = random_row(V, 20 + seed, 6.f);
    for (int64_t k : {int64_t{1}, int64_t{4}, V - 1, V}) {
      std::vector<int32_t> ids(static_cast<size_t>(k));
      std::vector<float> top(static_cast<size_t>(k));
      teacher_top_k(zt.data(), V, k, ids.data(), top.data());
      for (const Case& c : kCases) {
        const DistillLossOptions o{.divergence = c.d, .beta = c.beta, .temperature = T};
        double kl = 0;
        const double got = distill_row_top_k(zs.data(), V, ids.data(), top.data(), k, o, nullptr, &kl);
        const double want = plain_top_k_divergence(zs, zt, k, c.d, c.beta, T);
        EXPECT_NEAR(got, want, 1e-12 + 1e-9 * std::fabs(want))
            << divergence_name(c.d) << " beta " << c.beta << " k " << k << " seed " << seed;
        EXPECT_NEAR(kl, plain_top_k_divergence(zs, zt, k, Divergence::kForwardKl, 0, T), 1e-9);
        if (k == 1) {
          EXPECT_EQ(got, 0.0);  // one id: both renormalised distributions are 1 there
        }
        if (k == V) {  // the whole vocabulary: the full-vocabulary row
          EXPECT_NEAR(got, distill_row(zs.data(), zt.data(), V, o, nullptr, nullptr), 1e-12 + 1e-9 * std::fabs(want));
        }
      }
    }
  }
}

TEST(DistillTopK, RowGradientsMatchFiniteDifferencesAndVanishOffTheTopK) {
  const int64_t V = 11, k = 4;
  const std::vector<float> zs = random_row(V, 5, 4.f), zt = random_row(V, 6, 4.f);
  std::vector<int32_t> ids(k);
  std::vector<float> top(k);
  teacher_top_k(zt.data(), V, k, ids.data(), top.data());
  for (const Case& c : kCases) {
    for (float cap : {0.f, 3.f}) {
      const DistillLossOptions o{.divergence = c.d, .beta = c.beta, .temperature = 2.0, .final_softcap = cap};
      std::vector<float> g(static_cast<size_t>(V), 7.f);  // overwritten everywhere, zeros included
      distill_row_top_k(zs.data(), V, ids.data(), top.data(), k, o, g.data(), nullptr);
      double gnorm = 0;
      for (int64_t j = 0; j < V; ++j) {
        const float h = 1e-2f;
        std::vector<float> a = zs, b = zs;
        a[j] += h;
        b[j] -= h;
        const double fd = (distill_row_top_k(a.data(), V, ids.data(), top.data(), k, o, nullptr, nullptr) -
                           distill_row_top_k(b.data(), V, ids.data(), top.data(), k, o, nullptr, nullptr)) / (2.0 * h);
        EXPECT_NEAR(g[j], fd, 1e-4 + 1e-3 * std::fabs(fd)) << divergence_name(c.d) << " beta " << c.beta << " j " << j;
        if (std::find(ids.begin(), ids.end(), j) == ids.end()) {
          EXPECT_EQ(g[j], 0.f) << "j " << j << " is not in S";
        }
        gnorm += std::fabs(g[j]);
      }
      EXPECT_GT(gnorm, 1e-3) << divergence_name(c.d);  // a gradient to check at all
    }
  }
}

// A small head: hidden [N, C], weight [V, C], teacher logits [N, V]; rows 2 and 5 untrained.
struct Head {
  int64_t n = 7, c = 5, v = 12;
  Tensor hidden = testing::random_tensor({7, 5}, 1);
  Tensor weight = testing::random_tensor({12, 5}, 2, 0.7f);
  Tensor zt = testing::random_tensor({7, 12}, 3, 2.f);
  std::vector<int32_t> targets = {3, 0, -100, 11, 7, -100, 5};
  std::vector<double> weights = {0.5, 0.5, 0, 0.5, 0.5, 0, 0.5};
  TeacherLogitsFn live() const {
    return [this](int64_t r0, int64_t r) { return TeacherRows{.logits = zt.slice(0, r0, r0 + r).contiguous()}; };
  }
  // The teacher's top-k as a cache holds it: ids and logits [N, k].
  TeacherLogitsFn cached(int64_t k) const {
    std::vector<int32_t> ids(static_cast<size_t>(n * k));
    std::vector<float> top(static_cast<size_t>(n * k));
    const std::vector<float> z = zt.to_vector();
    for (int64_t i = 0; i < n; ++i) teacher_top_k(z.data() + i * v, v, k, ids.data() + i * k, top.data() + i * k);
    const Tensor ti = Tensor::from_data_i32({n, k}, ids), tz = Tensor::from_data({n, k}, top);
    return [ti, tz](int64_t r0, int64_t r) {
      return TeacherRows{.logits = tz.slice(0, r0, r0 + r).contiguous(), .ids = ti.slice(0, r0, r0 + r).contiguous()};
    };
  }
};

TEST(DistillTopK, HeadLossIsTheWeightedSumOfThePlainRows) {
  const Head h;
  const std::vector<float> zs = linear(h.hidden, h.weight).to_vector(), zt = h.zt.to_vector();
  for (const Case& c : kCases) {
    for (int64_t k : {int64_t{3}, h.v}) {
      DistillLossOptions o{.divergence = c.d, .beta = c.beta, .temperature = 1.5, .alpha = 1.0, .chunk_rows = 3,
                           .top_k = k};
      double want = 0;
      for (int64_t i = 0; i < h.n; ++i) {
        if (h.weights[i] == 0) continue;
        const std::vector<float> s(zs.begin() + i * h.v, zs.begin() + (i + 1) * h.v);
        const std::vector<float> t(zt.begin() + i * h.v, zt.begin() + (i + 1) * h.v);
        want += h.weights[i] * 1.5 * 1.5 * plain_top_k_divergence(s, t, k, c.d, c.beta, 1.5);
      }
      const double live = linear_distill_loss(h.hidden, h.weight, h.live(), h.targets, h.weights, o).item();
      const double cached = linear_distill_loss(h.hidden, h.weight, h.cached(k), h.targets, h.weights, o).item();
      // f32 student logits and an f32 loss: single-precision rounding of a sum of O(1) terms.
      EXPECT_NEAR(live, want, 1e-5 * std::max(1.0, std::fabs(want))) << divergence_name(c.d) << " k " << k;
      EXPECT_EQ(cached, live) << "the cached top-k is the live teacher's";
      if (k == h.v) {
        o.top_k = 0;
        const double full = linear_distill_loss(h.hidden, h.weight, h.live(), h.targets, h.weights, o).item();
        EXPECT_NEAR(live, full, 1e-6 * std::max(1.0, std::fabs(full))) << "k = V is the full vocabulary";
      }
    }
  }
}

TEST(DistillTopK, HeadGradientsMatchFiniteDifferences) {
  const Head h;
  for (const Case& c : kCases) {
    for (bool cached : {false, true}) {
      // alpha 0.6: the hard-label CE (full vocabulary) mixed in; soft-capped student logits.
      const DistillLossOptions o{.divergence = c.d, .beta = c.beta, .temperature = 2.0, .alpha = 0.6,
                                 .final_softcap = 4.f, .chunk_rows = 2, .top_k = 4};
      const TeacherLogitsFn teacher = cached ? h.cached(4) : h.live();
      Tensor x = h.hidden.clone(), w = h.weight.clone();
      x.set_requires_grad(true);
      w.set_requires_grad(true);
      const testing::GradCheckResult r = testing::gradcheck(
          [&](const std::vector<Tensor>& in) {
            return linear_distill_loss(in[0], in[1], teacher, h.targets, h.weights, o);
          },
          {x, w});
      EXPECT_LT(r.max_rel_err, 2e-3) << divergence_name(c.d) << " beta " << c.beta << " cached " << cached << "\n"
                                     << r.report;
    }
  }
}

TEST(DistillTopK, CachedIdsOutsideTheVocabularyAreRefused) {
  const Head h;
  const Tensor ids = Tensor::from_data_i32({h.n, 1}, std::vector<int32_t>(static_cast<size_t>(h.n), 12));
  const Tensor z = Tensor::zeros({h.n, 1});
  const TeacherLogitsFn bad = [&](int64_t r0, int64_t r) {
    return TeacherRows{.logits = z.slice(0, r0, r0 + r).contiguous(), .ids = ids.slice(0, r0, r0 + r).contiguous()};
  };
  const DistillLossOptions o{.top_k = 1};
  EXPECT_THROW(linear_distill_loss(h.hidden, h.weight, bad, h.targets, h.weights, o), InvalidArgument);
}

}  // namespace
}  // namespace lathe::posttrain
