// Tests of Tensor's layout queries: which views count as contiguous (read in place, never copied).
#include <gtest/gtest.h>

#include "lathe/tensor/tensor.h"

namespace lathe {
namespace {

TEST(TensorLayout, PackedAndTransposedViews) {
  const Tensor t = Tensor::zeros({2, 3, 4});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.transpose(1, 2).is_contiguous());
  EXPECT_FALSE(t.slice(1, 0, 2).is_contiguous());   // rows of dim 2 skip a gap
  EXPECT_TRUE(t.slice(0, 1, 2).is_contiguous());    // the second [3, 4] block
  EXPECT_FALSE(t.slice(2, 0, 1).is_contiguous());   // [2, 3, 1]: one column, stride 4 between rows
}

// A size-1 dimension's stride is irrelevant: a prefix slice of a [1, capacity, ...] buffer is read in place.
TEST(TensorLayout, SizeOneDimensionsIgnoreTheirStride) {
  Tensor cache = Tensor::zeros({1, 16, 2, 8});  // [1, capacity, Hkv, D]
  const Tensor prefix = cache.slice(1, 0, 5);    // [1, 5, 2, 8], stride(0) = 16 * 2 * 8
  EXPECT_TRUE(prefix.is_contiguous());
  const Tensor same = prefix.contiguous();
  EXPECT_EQ(same.raw_data(), prefix.raw_data());  // no copy
  EXPECT_TRUE(cache.slice(1, 3, 4).is_contiguous());  // [1, 1, 2, 8] at an offset
  // Values read through the view match the packed layout.
  cache.slice(1, 1, 2).fill(2.f);
  const std::vector<float> v = cache.slice(1, 0, 3).view({-1}).to_vector();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], i >= 16 && i < 32 ? 2.f : 0.f) << i;
  // A size-1 middle dimension between strided ones.
  const Tensor t = Tensor::zeros({4, 1, 6});
  EXPECT_TRUE(t.transpose(0, 1).slice(2, 0, 6).is_contiguous());  // [1, 4, 6]
  EXPECT_FALSE(t.slice(2, 0, 3).is_contiguous());                   // [4, 1, 3]: gaps between rows
}

}  // namespace
}  // namespace lathe
