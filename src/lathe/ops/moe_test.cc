#include "lathe/ops/moe.h"

#include <gtest/gtest.h>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/moe.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

struct MoeCase {
  int64_t n, c, e, f;
  MoeOptions opt;
};

std::vector<Tensor> make_inputs(const MoeCase& m, uint32_t seed) {
  return {random_tensor({m.n, m.c}, seed), random_tensor({m.e, m.c}, seed + 1),
          random_tensor({m.e, m.f, m.c}, seed + 2, 0.5f), random_tensor({m.e, m.f, m.c}, seed + 3, 0.5f),
          random_tensor({m.e, m.c, m.f}, seed + 4, 0.5f)};
}

// Each output sums K experts of F-term and C-term f32 dot products of O(1) values: ~1e-6 relative
// rounding; 1e-5·(1 + |ref|) leaves room for the routing weight and SiLU's ~1-ulp exp.
void expect_matches_reference(const MoeCase& m, uint32_t seed) {
  std::vector<Tensor> in = make_inputs(m, seed);
  std::vector<float> out = moe(in[0], in[1], in[2], in[3], in[4], m.opt).to_vector();
  std::vector<float> v[5];
  for (int i = 0; i < 5; ++i) v[i] = in[i].to_vector();
  std::vector<float> ref(m.n * m.c);
  ref::moe(v[0].data(), v[1].data(), v[2].data(), v[3].data(), v[4].data(), ref.data(), m.n, m.c, m.e, m.f, m.opt.top_k,
           m.opt.norm_topk_prob);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5 * (1 + std::abs(ref[i]))) << i;
}

TEST(Moe, Top2MatchesReference) { expect_matches_reference({13, 7, 5, 9, {.top_k = 2}}, 1); }
TEST(Moe, NormalisedTop3MatchesReference) {
  expect_matches_reference({21, 10, 6, 11, {.top_k = 3, .norm_topk_prob = true}}, 2);
}
TEST(Moe, SingleTokenAndAllExpertsMatchReference) {
  expect_matches_reference({1, 16, 4, 8, {.top_k = 1}}, 3);
  expect_matches_reference({9, 5, 3, 4, {.top_k = 3, .norm_topk_prob = true}}, 4);  // K = E: dense
}

TEST(Moe, Bf16ExpertsMatchF32WithinRounding) {
  const MoeCase m{6, 32, 4, 16, {.top_k = 2}};
  std::vector<Tensor> in = make_inputs(m, 5);
  std::vector<float> ref = moe(in[0], in[1], in[2], in[3], in[4], m.opt).to_vector();
  std::vector<float> got = moe(in[0], in[1], in[2].to(DType::kBF16), in[3].to(DType::kBF16), in[4].to(DType::kBF16), m.opt)
                               .to_vector();
  // bf16 rounding (2^-9 relative) of all three weights: every output's error is ~2^-9·sqrt(terms) of the
  // typical term; cancellation makes some outputs small, so bound by 1% of the largest |output|.
  double max_ref = 0;
  for (float r : ref) max_ref = std::max(max_ref, static_cast<double>(std::abs(r)));
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 0.01 * max_ref) << i;
}

TEST(Moe, TiesGoToTheLowestExpert) {
  // A zero router makes every probability 1/E: torch.topk keeps experts 0..K-1. Expert 0 and 1 are
  // given distinct weights so choosing others would change the output.
  const int64_t C = 3, E = 4, F = 2;
  Tensor x = random_tensor({2, C}, 6), router = Tensor::zeros({E, C});
  Tensor wg = random_tensor({E, F, C}, 7), wu = random_tensor({E, F, C}, 8), wd = random_tensor({E, C, F}, 9);
  std::vector<float> out = moe(x, router, wg, wu, wd, {.top_k = 2}).to_vector();
  std::vector<float> ref(2 * C), v[5] = {x.to_vector(), router.to_vector(), wg.to_vector(), wu.to_vector(), wd.to_vector()};
  ref::moe(v[0].data(), v[1].data(), v[2].data(), v[3].data(), v[4].data(), ref.data(), 2, C, E, F, 2, false);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], ref[i], 1e-5) << i;
}

// Smooth for a fixed expert choice; eps 1e-3 keeps the top-k choice from flipping (router margins here
// are > 1e-2) while f32 rounding of the weighted sum costs ~1e-7·|f|/eps ~ 1e-4 relative: 5e-3 bound.
double check_gradients(const MoeCase& m, uint32_t seed) {
  std::vector<Tensor> in = make_inputs(m, seed);
  for (Tensor& t : in) t.set_requires_grad();
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return moe(t[0], t[1], t[2], t[3], t[4], m.opt); }, in, 1e-3f);
  EXPECT_LT(r.max_rel_err, 5e-3) << r.report;
  return r.max_rel_err;
}

TEST(Moe, GradientsMatchFiniteDifferences) { check_gradients({5, 6, 4, 3, {.top_k = 2}}, 11); }
TEST(Moe, GradientsWithNormalisedTopK) { check_gradients({6, 5, 5, 4, {.top_k = 3, .norm_topk_prob = true}}, 12); }

TEST(Moe, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({2, 4}), router = Tensor::zeros({3, 4});
  const Tensor w = Tensor::zeros({3, 5, 4}), wd = Tensor::zeros({3, 4, 5});
  EXPECT_THROW(moe(x, router, w, w, wd, {.top_k = 4}), InvalidArgument);
  EXPECT_THROW(moe(x, router, w, w, w, {.top_k = 2}), InvalidArgument);
  EXPECT_THROW(moe(x, Tensor::zeros({3, 5}), w, w, wd, {.top_k = 2}), InvalidArgument);
}

}  // namespace
}  // namespace lathe
