// What the recorded graph keeps alive: the tensors gradient rules saved, never an op output only because
// a later op consumed it.
#include <gtest/gtest.h>

#include <memory>

#include "lathe/autograd/node.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/gradcheck.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/reshape.h"

namespace lathe {
namespace {

// y = x·wᵀ + (x·aᵀ)·bᵀ, the shape of a LoRA Linear: the two [N, out] terms feed only the add, whose rule
// needs neither, so both are freed as soon as the forward drops them.
TEST(GraphMemory, AnAddDoesNotKeepItsInputs) {
  Tensor w = testing::random_tensor({5, 4}, 1, 0.2f), a = testing::random_tensor({2, 4}, 2, 0.2f),
         b = testing::random_tensor({5, 2}, 3, 0.2f);
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor x = testing::random_tensor({3, 4}, 4, 0.5f);
  std::weak_ptr<Storage> base_out, delta_out;
  Tensor y;
  {
    Tensor base = linear(x, w), delta = linear(linear(x, a), b);
    base_out = base.storage();
    delta_out = delta.storage();
    y = add(base, delta);
  }
  EXPECT_TRUE(base_out.expired()) << "the graph keeps the frozen base's output";
  EXPECT_TRUE(delta_out.expired()) << "the graph keeps the adapter's output";
  backward(linear(reshape(y, {1, 15}), Tensor::full({1, 15}, 1.f)));  // the sum, as a 1x1 matmul
  EXPECT_TRUE(a.grad().defined() && b.grad().defined());
}

// A cast to bf16 keeps the f32 input's producer in the graph, not the f32 input itself.
TEST(GraphMemory, ACastToBf16FreesItsF32Input) {
  Tensor w = testing::random_tensor({6, 4}, 5, 0.2f);
  w.set_requires_grad(true);
  const Tensor x = testing::random_tensor({3, 4}, 6, 0.5f);
  std::weak_ptr<Storage> f32_out;
  Tensor h;
  {
    Tensor y = linear(x, w);
    f32_out = y.storage();
    h = to_bf16(y);
  }
  EXPECT_TRUE(f32_out.expired());
  // loss = Σ_{n,o} (h·1ᵀ)[n] over a bf16 ones weight: d/dw[o, i] = Σ_n x[n, i], the same for every o.
  const Tensor ones = to_bf16(Tensor::full({1, 6}, 1.f));
  backward(linear(reshape(linear(h, ones), {1, 3}), Tensor::full({1, 3}, 1.f)));
  ASSERT_TRUE(w.grad().defined());
  const std::vector<float> g = w.grad().to_vector(), xs = x.to_vector();
  for (int64_t o = 0; o < 6; ++o)
    for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(g[o * 4 + i], xs[i] + xs[4 + i] + xs[8 + i], 1e-5f);
}

// A second backward through a graph the first one released is an error, not a silent wrong gradient.
TEST(GraphMemory, ASecondBackwardThroughAReleasedGraphThrows) {
  Tensor w = testing::random_tensor({2, 3}, 7, 0.2f);
  w.set_requires_grad(true);
  const Tensor h = linear(testing::random_tensor({1, 3}, 8, 0.5f), w);  // [1, 2]
  backward(linear(h, Tensor::full({1, 2}, 1.f)));
  EXPECT_THROW(backward(linear(h, Tensor::full({1, 2}, 2.f))), InvalidArgument);
}

}  // namespace
}  // namespace lathe
