#include "lathe/ops/embedding.h"

#include <gtest/gtest.h>

#include <random>

#include "lathe/ops/gradcheck.h"
#include "lathe/ref/embedding.h"

namespace lathe {
namespace {

using testing::gradcheck;
using testing::random_tensor;

std::vector<int32_t> random_ids(int64_t n, int32_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, v - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = dist(rng);
  return ids;
}

// A gather copies values: kernel and reference agree exactly, for f32, bf16 and f16 weights.
TEST(Embedding, MatchesReferenceExactly) {
  const int64_t v = 11, c = 37;
  Tensor w = random_tensor({v, c}, 1);
  std::vector<int32_t> idv = random_ids(6, v, 2);
  Tensor ids = Tensor::from_data_i32({2, 3}, idv);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    Tensor wt = w.to(dt);
    Tensor out = embedding(wt, ids);
    ASSERT_EQ(out.shape(), (Shape{2, 3, c}));
    std::vector<float> wv = wt.to_vector(), r(6 * c);
    ref::embedding(wv.data(), idv.data(), 6, c, r.data(), [](float x) { return x; });
    EXPECT_EQ(out.to_vector(), r) << dtype_name(dt);
  }
}

TEST(Embedding, OutOfRangeIdNamesTheId) {
  Tensor w = Tensor::zeros({10, 4});
  try {
    embedding(w, Tensor::from_data_i32({3}, {1, 12345, 2}));
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("12345"), std::string::npos) << e.what();
  }
  EXPECT_THROW(embedding(w, Tensor::from_data_i32({1}, {-1})), InvalidArgument);
  EXPECT_THROW(embedding(w, Tensor::zeros({2})), InvalidArgument);  // f32 ids
}

// The gradient is linear in g: finite differences are exact up to f32 output rounding (see
// elementwise_test), so 1e-3. Repeated ids check that rows accumulate rather than overwrite.
TEST(Embedding, GradientMatchesFiniteDifferencesWithRepeatedIds) {
  Tensor ids = Tensor::from_data_i32({5}, {3, 0, 3, 4, 3});
  std::vector<Tensor> in = {random_tensor({6, 5}, 1).set_requires_grad()};
  auto r = gradcheck([&](const std::vector<Tensor>& t) { return embedding(t[0], ids); }, in);
  EXPECT_LT(r.max_rel_err, 1e-3) << r.report;
}

// Large enough for the threaded scatter (N·C > 64K): each worker owns a vocabulary slice and sums in id
// order, exactly as the reference does, so the match is exact up to the reference's double rounding
// (the f32 kernel sums ≤ N values per entry: ≤ 1e-6 relative here).
TEST(Embedding, ThreadedScatterAddMatchesReference) {
  const int64_t v = 50, c = 257, n = 300;
  std::vector<int32_t> idv = random_ids(n, v, 3);
  Tensor ids = Tensor::from_data_i32({n}, idv);
  Tensor w = random_tensor({v, c}, 4).set_requires_grad();
  Tensor out = embedding(w, ids);
  Tensor g = random_tensor({n, c}, 5);
  Tensor loss = Tensor::full({1}, 0.f);
  record(loss, "test_seed", {out}, [g](const Tensor&) -> std::vector<Tensor> { return {g.clone()}; });
  backward(loss);
  std::vector<float> ref_dw(v * c, 0.f), gv = g.to_vector();
  ref::embedding_backward(gv.data(), idv.data(), n, v, c, ref_dw.data());
  std::vector<float> dw = w.grad().to_vector();
  for (int64_t i = 0; i < v * c; ++i) EXPECT_NEAR(dw[i], ref_dw[i], 1e-5 * (1 + std::fabs(ref_dw[i]))) << i;
}

TEST(Embedding, Bf16WeightRejectsGradients) {
  Tensor w = random_tensor({4, 3}, 1).to(DType::kBF16).set_requires_grad();
  EXPECT_THROW(embedding(w, Tensor::from_data_i32({1}, {2})), InvalidArgument);
}

TEST(Embedding, F16WeightRejectsGradients) {
  Tensor w = random_tensor({4, 3}, 1).to(DType::kF16).set_requires_grad();
  EXPECT_THROW(embedding(w, Tensor::from_data_i32({1}, {2})), InvalidArgument);
}

}  // namespace
}  // namespace lathe
