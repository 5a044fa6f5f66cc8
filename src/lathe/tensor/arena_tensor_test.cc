// Tensors in a HugePageArena: empty_in_arena falls back to the allocator when full; move_into_arena
// copies each storage once (views of one buffer stay views of one copy), keeps values, layout and
// autograd flags, and leaves tensors already there (or without room) where they are.
#include "lathe/tensor/arena_tensor.h"

#include <gtest/gtest.h>

#include <vector>

namespace lathe {
namespace {

TEST(ArenaTensor, EmptyInArenaFallsBackToTheAllocatorWhenFull) {
  HugePageArena arena(HugePageArena::footprint(6 * 4));
  const Tensor a = empty_in_arena(arena, {2, 3}, DType::kF32);
  EXPECT_TRUE(arena.contains(a.raw_data()));
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_FALSE(a.storage()->read_only);
  const Tensor b = empty_in_arena(arena, {2}, DType::kBF16);  // no room left
  EXPECT_TRUE(b.defined());
  EXPECT_FALSE(arena.contains(b.raw_data()));
  EXPECT_EQ(b.dtype(), DType::kBF16);
}

TEST(ArenaTensor, MoveCopiesEachStorageOnceAndKeepsViews) {
  const Tensor whole = Tensor::from_data({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor top = whole.slice(0, 0, 1), rest = whole.slice(0, 1, 3);  // two views of one buffer (GPT-2 c_attn)
  Tensor other = Tensor::from_data({2}, {7, 8});
  other.set_requires_grad(true);
  HugePageArena arena(1024);
  std::vector<Tensor*> slots = {&top, &rest, &other};
  move_into_arena(slots, arena);
  for (const Tensor* t : slots) EXPECT_TRUE(arena.contains(t->raw_data()));
  EXPECT_EQ(top.storage(), rest.storage());  // one copy of the shared buffer
  EXPECT_EQ(arena.used(), HugePageArena::footprint(6 * 4) + HugePageArena::footprint(2 * 4));
  EXPECT_EQ(rest.offset(), 2);
  EXPECT_EQ(top.to_vector(), (std::vector<float>{1, 2}));
  EXPECT_EQ(rest.to_vector(), (std::vector<float>{3, 4, 5, 6}));
  EXPECT_EQ(other.to_vector(), (std::vector<float>{7, 8}));
  EXPECT_TRUE(other.requires_grad());
  top.fill(0.f);  // a copy: the original buffer is untouched, the sibling view still aliases the copy
  EXPECT_EQ(whole.to_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(rest.storage()->data, top.raw_data());
  // Moving again changes nothing.
  const void* before = rest.raw_data();
  move_into_arena(slots, arena);
  EXPECT_EQ(rest.raw_data(), before);
  EXPECT_EQ(arena.used(), HugePageArena::footprint(6 * 4) + HugePageArena::footprint(2 * 4));
}

TEST(ArenaTensor, MoveLeavesATensorWithoutRoomInPlace) {
  Tensor big = Tensor::zeros({64});
  Tensor small = Tensor::full({2}, 3.f);
  const void* big_before = big.raw_data();
  HugePageArena arena(64);
  std::vector<Tensor*> slots = {&big, &small};
  move_into_arena(slots, arena);
  EXPECT_EQ(big.raw_data(), big_before);
  EXPECT_TRUE(arena.contains(small.raw_data()));
  EXPECT_EQ(small.to_vector(), (std::vector<float>{3, 3}));
}

}  // namespace
}  // namespace lathe
