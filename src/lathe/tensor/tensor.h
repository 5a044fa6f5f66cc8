// Tensor: a shared handle to (storage, offset, shape, strides, dtype) plus its autograd slot.
// Storage is reference counted and may be owned memory (64-byte aligned, from the context's allocator or
// a model's huge-page arena: arena_tensor.h) or a read-only memory map of a checkpoint (used in place).
// Views share storage; copies are explicit (clone()).
// Shapes are in PyTorch order, weights [out, in] (glossary: docs/architecture.md).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/tensor/dtype.h"

namespace lathe {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 12, 64]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

// A block of bytes. `owner` keeps the memory alive (aligned heap block or a file mapping).
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  bool read_only = false;  // a mapped checkpoint: writing through it would fault
  std::shared_ptr<void> owner;
  static std::shared_ptr<Storage> allocate(size_t nbytes);  // uninitialised, 64-byte aligned
};

struct Node;  // autograd/node.h
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // --- creation -------------------------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = DType::kF32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::kF32);
  static Tensor full(const Shape& shape, float value, DType dtype = DType::kF32);
  static Tensor from_data(const Shape& shape, const std::vector<float>& values);
  static Tensor from_data_i32(const Shape& shape, const std::vector<int32_t>& values);
  // Wraps existing storage without copying.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                             int64_t offset_elems = 0);

  // --- metadata -------------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int dim() const { return static_cast<int>(shape().size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const;
  int64_t offset() const;
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const;

  // --- data -----------------------------------------------------------------------------------
  void* raw_data() const;  // pointer to element 0 of this view
  template <class T>
  T* data() const {
    LATHE_CHECK_ARG(dtype_of<T>() == dtype(), "tensor of dtype ", dtype_name(dtype()), " read as ",
                    dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }
  float item() const;                   // single-element tensor as float
  std::vector<float> to_vector() const;  // any float dtype, any layout -> f32 values in order

  // --- views and copies (no autograd unless noted in ops/) ----------------------------------
  Tensor view(const Shape& shape) const;  // contiguous only; one dim may be -1
  Tensor slice(int dim, int64_t begin, int64_t end) const;  // view
  Tensor select(int dim, int64_t index) const;             // view, drops dim
  Tensor transpose(int d0, int d1) const;                  // view
  Tensor contiguous() const;  // self if contiguous, else a packed copy
  Tensor clone() const;       // always a packed copy
  Tensor to(DType dtype) const;  // converted packed copy (self if same dtype and contiguous)
  void copy_from(const Tensor& src);  // same shape; converts dtype
  void fill(float value);

  // --- autograd -------------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);
  Tensor grad() const;  // accumulated gradient of a leaf (undefined until backward)
  void zero_grad();     // drops the accumulated gradient
  Tensor detach() const;  // same storage, no autograd history
  const std::shared_ptr<Node>& grad_fn() const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape, strides;
  DType dtype = DType::kF32;
  bool requires_grad = false;
  Tensor grad;                    // accumulated gradient (leaves only)
  std::shared_ptr<Node> grad_fn;  // the op that produced this tensor, when recorded
};

// Non-owning description handed to kernels (validated by the op front; kernels do not re-check).
struct TensorView {
  void* data;
  Shape shape, strides;
  DType dtype;
};

}  // namespace lathe
