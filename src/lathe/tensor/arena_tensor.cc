#include "lathe/tensor/arena_tensor.h"

#include <cstring>
#include <utility>
#include <vector>

namespace lathe {
namespace {

// Storage over the next nbytes of the arena, or nullptr when they do not fit.
std::shared_ptr<Storage> arena_storage(HugePageArena& arena, size_t nbytes) {
  void* p = arena.take(nbytes);
  if (!p) return nullptr;
  auto st = std::make_shared<Storage>();
  st->data = p;
  st->nbytes = nbytes;
  st->owner = std::shared_ptr<void>(arena.owner(), p);  // keeps the whole block mapped
  return st;
}

}  // namespace

Tensor empty_in_arena(HugePageArena& arena, const Shape& shape, DType dtype) {
  for (int64_t d : shape) LATHE_CHECK_ARG(d >= 0, "[empty_in_arena] negative dimension in shape ", shape_str(shape));
  std::shared_ptr<Storage> st = arena_storage(arena, static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype));
  return st ? Tensor::from_storage(std::move(st), shape, dtype) : Tensor::empty(shape, dtype);
}

void move_into_arena(std::span<Tensor* const> tensors, HugePageArena& arena) {
  // (old storage, its copy): the old ones are held until the end, so no address is reused while compared.
  std::vector<std::pair<std::shared_ptr<Storage>, std::shared_ptr<Storage>>> moved;
  for (Tensor* t : tensors) {
    if (!t->defined()) continue;
    const std::shared_ptr<Storage> old = t->storage();
    if (!old || old->nbytes == 0 || arena.contains(old->data)) continue;
    std::shared_ptr<Storage> copy;
    for (const auto& [from, to] : moved)
      if (from == old) copy = to;
    if (!copy) {
      copy = arena_storage(arena, old->nbytes);
      if (!copy) continue;
      std::memcpy(copy->data, old->data, old->nbytes);
      moved.emplace_back(old, copy);
    }
    auto impl = std::make_shared<TensorImpl>(*t->impl());
    impl->storage = std::move(copy);
    *t = Tensor(std::move(impl));
  }
}

}  // namespace lathe
