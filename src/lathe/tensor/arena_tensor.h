// Tensors whose storage is carved from a HugePageArena (base/huge_page_arena.h): a model keeps its
// weights (and bf16 compute copies) in one arena on transparent huge pages. Such a tensor is an ordinary
// owner (writable, its own Storage, its own gradient); its Storage's owner is an alias of the arena's block.
#pragma once

#include <span>

#include "lathe/base/huge_page_arena.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

// An uninitialised contiguous tensor in `arena`; from the context allocator (Tensor::empty) when the arena
// has no room left.
Tensor empty_in_arena(HugePageArena& arena, const Shape& shape, DType dtype);

// Gives each tensor of `tensors` storage in `arena`: every distinct storage not there yet is copied in
// once, so views of one buffer (GPT-2's fused c_attn parts) stay views of one copy, and each tensor keeps
// its offset, shape, strides, dtype and autograd state. A storage with no room left stays where it is.
// The storage is copied whole: the caller passes tensors that span their storages (a model's parameters).
void move_into_arena(std::span<Tensor* const> tensors, HugePageArena& arena);

}  // namespace lathe
