#include "lathe/ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/context.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ref/attention.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

struct Case {
  int64_t b, t, s, h, hkv, d;
  AttentionOptions opt;
};

std::vector<float> reference(const Tensor& q, const Tensor& k, const Tensor& v, const Case& c) {
  std::vector<float> qv = q.to_vector(), kv = k.to_vector(), vv = v.to_vector(), out(qv.size());
  const double scale = c.opt.scale != 0.f ? c.opt.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  ref::scaled_dot_product_attention(qv.data(), kv.data(), vv.data(), out.data(), c.b, c.t, c.s, c.h, c.hkv, c.d, scale,
                                    c.opt.causal, c.opt.window, c.opt.softcap, c.opt.q_offset);
  return out;
}

// Outputs are convex combinations of v (|v| ~ 1): f32 scores over D terms and a ~1-ulp exp leave
// errors near 1e-6; 2e-5 leaves room for S-term sums in the P·V product.
void expect_matches_reference(const Case& c, uint32_t seed) {
  Tensor q = random_tensor({c.b, c.t, c.h, c.d}, seed), k = random_tensor({c.b, c.s, c.hkv, c.d}, seed + 1),
         v = random_tensor({c.b, c.s, c.hkv, c.d}, seed + 2);
  std::vector<float> out = scaled_dot_product_attention(q, k, v, c.opt).to_vector(), ref = reference(q, k, v, c);
  ASSERT_EQ(out.size(), ref.size());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], 2e-5) << i;
}

TEST(Attention, CausalGqaMatchesReference) { expect_matches_reference({2, 7, 7, 4, 2, 5, {}}, 1); }

TEST(Attention, NonCausalCrossLengthsMatchesReference) {
  expect_matches_reference({2, 3, 9, 3, 3, 6, {.causal = false}}, 2);
}

TEST(Attention, SlidingWindowWithOffsetMatchesReference) {
  expect_matches_reference({1, 5, 11, 2, 1, 7, {.window = 3, .q_offset = 6}}, 3);
}

TEST(Attention, SoftcapAndCustomScaleMatchesReference) {
  expect_matches_reference({2, 6, 6, 4, 1, 4, {.scale = 0.9f, .softcap = 2.f}}, 4);
}

TEST(Attention, ManyRowBlocksMatchReference) {  // T > kRowBlock: per-block key ranges
  expect_matches_reference({1, 150, 150, 2, 1, 8, {}}, 5);
  expect_matches_reference({2, 131, 140, 2, 2, 3, {.window = 40, .q_offset = 9}}, 6);
  expect_matches_reference({1, 70, 90, 2, 1, 5, {.causal = false}}, 7);
}

// Head dims that are a multiple of 16 take the register-tiled kernels: every slice width (16..64, and
// 64 + 16), row counts that leave partial 4-row tiles, key counts off the 32-column blocks.
TEST(Attention, TiledCausalGqaMatchesReference) {
  expect_matches_reference({2, 7, 7, 4, 2, 16, {}}, 31);
  expect_matches_reference({1, 37, 37, 2, 1, 64, {}}, 32);
  expect_matches_reference({1, 9, 9, 3, 3, 80, {}}, 33);
}

TEST(Attention, TiledNonCausalCrossLengthsMatchesReference) {
  expect_matches_reference({2, 3, 41, 2, 1, 32, {.causal = false}}, 34);
  expect_matches_reference({1, 10, 5, 2, 2, 48, {.causal = false}}, 35);
}

TEST(Attention, TiledWindowOffsetSoftcapMatchesReference) {
  expect_matches_reference({1, 5, 70, 2, 1, 16, {.window = 3, .q_offset = 60}}, 36);
  expect_matches_reference({2, 45, 50, 4, 2, 32, {.window = 20, .q_offset = 5}}, 37);
  expect_matches_reference({2, 6, 6, 4, 1, 64, {.scale = 0.2f, .softcap = 2.f}}, 38);
}

// Attention is smooth; central differences with eps 1e-2 in f32 have truncation error ~eps²·|f'''| and
// rounding error ~1e-7·|f|/eps, both ~1e-4 relative here, so 2e-3 separates a wrong rule from noise.
double grad_error(const Case& c, uint32_t seed) {
  std::vector<Tensor> in = {random_tensor({c.b, c.t, c.h, c.d}, seed).set_requires_grad(),
                            random_tensor({c.b, c.s, c.hkv, c.d}, seed + 1).set_requires_grad(),
                            random_tensor({c.b, c.s, c.hkv, c.d}, seed + 2).set_requires_grad()};
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2], c.opt); },
                     in);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
  return r.max_rel_err;
}

TEST(Attention, GradientCausalGqa) { grad_error({2, 5, 5, 4, 2, 3, {}}, 11); }
TEST(Attention, GradientNonCausal) { grad_error({1, 3, 6, 2, 1, 4, {.causal = false}}, 12); }
TEST(Attention, GradientWindowOffset) { grad_error({1, 4, 9, 2, 2, 3, {.window = 3, .q_offset = 5}}, 13); }
TEST(Attention, GradientSoftcap) { grad_error({1, 5, 5, 2, 1, 3, {.scale = 1.3f, .softcap = 1.5f}}, 14); }
TEST(Attention, GradientManyRowBlocks) { grad_error({1, 70, 70, 1, 1, 2, {.window = 50}}, 15); }

TEST(Attention, TiledGradientCausalGqa) { grad_error({2, 6, 6, 4, 2, 16, {}}, 41); }
TEST(Attention, TiledGradientNonCausal) { grad_error({1, 3, 37, 2, 1, 16, {.causal = false}}, 42); }
TEST(Attention, TiledGradientWindowOffset) { grad_error({1, 9, 40, 2, 2, 16, {.window = 5, .q_offset = 31}}, 43); }
TEST(Attention, TiledGradientSoftcapWideHead) {
  grad_error({1, 5, 5, 2, 1, 80, {.scale = 0.3f, .softcap = 1.5f}}, 44);
}

TEST(Attention, GradientOnlyForInputsThatNeedIt) {
  Tensor q = random_tensor({1, 4, 2, 3}, 1), k = random_tensor({1, 4, 1, 3}, 2).set_requires_grad(),
         v = random_tensor({1, 4, 1, 3}, 3);
  std::vector<Tensor> in = {q, k, v};
  auto r = gradcheck([](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2]); }, in);
  EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
  EXPECT_FALSE(q.grad().defined());
}

// Decode equals prefill's last row (T = 1 at q_offset S − 1), with GQA, a window and a softcap.
TEST(Attention, RejectsBadArguments) {
  const Tensor q = Tensor::zeros({1, 4, 3, 8}), k = Tensor::zeros({1, 4, 2, 8});
  EXPECT_THROW(scaled_dot_product_attention(q, k, k), InvalidArgument);  // 3 heads over 2 kv heads
  const Tensor k1 = Tensor::zeros({1, 4, 1, 8});
  EXPECT_THROW(scaled_dot_product_attention(q, k1, k1, {.q_offset = 1}), InvalidArgument);  // past the keys
  EXPECT_THROW(scaled_dot_product_attention(q, k1, k1, {.causal = false, .window = 2}), InvalidArgument);
  EXPECT_THROW(scaled_dot_product_attention(q, k1, Tensor::zeros({1, 4, 1, 7})), InvalidArgument);
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// Document masking: [B, T] key_start makes each document of a packed row attend only within itself, so
// every document's output equals attention over that document alone. Both kernel paths (D = 8: row-block
// GEMMs, D = 16: tiles), with gradient checks.
Tensor doc_key_start(const std::vector<std::vector<int>>& docs, int64_t T) {
  std::vector<int32_t> ks;
  for (const auto& starts : docs)
    for (int64_t i = 0; i < T; ++i) {
      int32_t s = 0;
      for (int st : starts)
        if (st <= i) s = st;
      ks.push_back(s);
    }
  return Tensor::from_data_i32({static_cast<int64_t>(docs.size()), T}, ks);
}

TEST(Attention, DocumentMaskingEqualsSeparateDocuments) {
  const std::vector<std::vector<int>> docs = {{0, 5}, {0, 3, 8}};
  const int64_t T = 12;
  for (int64_t D : {8, 16}) {
    SCOPED_TRACE(D);
    Tensor q = random_tensor({2, T, 2, D}, 61), k = random_tensor({2, T, 1, D}, 62), v = random_tensor({2, T, 1, D}, 63);
    const Tensor out = scaled_dot_product_attention(q, k, v, {.key_start = doc_key_start(docs, T)});
    for (int64_t b = 0; b < 2; ++b) {
      std::vector<int> bounds = docs[b];
      bounds.push_back(static_cast<int>(T));
      for (size_t d = 0; d + 1 < bounds.size(); ++d) {
        const int64_t a = bounds[d], e = bounds[d + 1];
        const auto part = [&](const Tensor& x) { return x.slice(0, b, b + 1).slice(1, a, e).contiguous(); };
        const std::vector<float> want = scaled_dot_product_attention(part(q), part(k), part(v)).to_vector();
        const std::vector<float> got = part(out).to_vector();
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "row " << b << " doc " << d;
      }
    }
    std::vector<Tensor> in = {random_tensor({2, T, 2, D}, 71).set_requires_grad(),
                              random_tensor({2, T, 1, D}, 72).set_requires_grad(),
                              random_tensor({2, T, 1, D}, 73).set_requires_grad()};
    const AttentionOptions opt{.key_start = doc_key_start(docs, T)};
    auto r = testing::gradcheck(
        [&](const std::vector<Tensor>& t) { return scaled_dot_product_attention(t[0], t[1], t[2], opt); }, in);
    EXPECT_LT(r.max_rel_err, 2e-3) << r.report;
  }
  // A key_start past the query's own position would leave it nothing to attend to.
  Tensor q = random_tensor({1, 3, 1, 8}, 1);
  EXPECT_THROW(scaled_dot_product_attention(q, q, q, {.key_start = Tensor::from_data_i32({1, 3}, {0, 2, 1})}),
               InvalidArgument);
}

}  // namespace
}  // namespace lathe
