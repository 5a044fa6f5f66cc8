#include "lathe/tensor/tensor.h"

#include "lathe/base/context.h"

#include <cstdlib>
#include <sstream>

namespace lathe {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  auto st = std::make_shared<Storage>();
  try {
    st->owner = current_context().alloc.allocate(nbytes);
  } catch (const std::bad_alloc&) {
    throw Error(str_cat("out of memory allocating ", nbytes, " bytes"));
  }
  st->data = st->owner.get();
  st->nbytes = nbytes;
  return st;
}

namespace {
void for_each_index(const Shape& shape, const std::function<void(const int64_t* idx)>& fn) {
  const int n = static_cast<int>(shape.size());
  if (shape_numel(shape) == 0) return;
  std::vector<int64_t> idx(n, 0);
  while (true) {
    fn(idx.data());
    int d = n - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

float load_as_float(const void* p, DType t) {
  switch (t) {
    case DType::kF32: return *static_cast<const float*>(p);
    case DType::kBF16: return bf16_to_f32(*static_cast<const bf16*>(p));
    case DType::kF16: return f16_to_f32(*static_cast<const f16*>(p));
    case DType::kI32: return static_cast<float>(*static_cast<const int32_t*>(p));
    case DType::kI64: return static_cast<float>(*static_cast<const int64_t*>(p));
    case DType::kI8: return *static_cast<const int8_t*>(p);
    case DType::kU8: return *static_cast<const uint8_t*>(p);
    case DType::kBool: return *static_cast<const uint8_t*>(p) ? 1.f : 0.f;
    case DType::kCount: break;
  }
  return 0.f;
}

bool dtype_is_integer(DType t) {
  return t == DType::kI32 || t == DType::kI64 || t == DType::kI8 || t == DType::kU8 || t == DType::kBool;
}

int64_t load_as_i64(const void* p, DType t) {
  switch (t) {
    case DType::kI32: return *static_cast<const int32_t*>(p);
    case DType::kI64: return *static_cast<const int64_t*>(p);
    case DType::kI8: return *static_cast<const int8_t*>(p);
    case DType::kU8: return *static_cast<const uint8_t*>(p);
    case DType::kBool: return *static_cast<const uint8_t*>(p) ? 1 : 0;
    default: return 0;
  }
}

void store_from_i64(void* p, DType t, int64_t v) {
  switch (t) {
    case DType::kI32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::kI64: *static_cast<int64_t*>(p) = v; break;
    case DType::kI8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::kU8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case DType::kBool: *static_cast<uint8_t*>(p) = v != 0; break;
    default: break;
  }
}

void store_from_float(void* p, DType t, float v) {
  switch (t) {
    case DType::kF32: *static_cast<float*>(p) = v; break;
    case DType::kBF16: *static_cast<bf16*>(p) = f32_to_bf16(v); break;
    case DType::kF16: *static_cast<f16*>(p) = f32_to_f16(v); break;
    case DType::kI32: *static_cast<int32_t*>(p) = static_cast<int32_t>(v); break;
    case DType::kI64: *static_cast<int64_t*>(p) = static_cast<int64_t>(v); break;
    case DType::kI8: *static_cast<int8_t*>(p) = static_cast<int8_t>(v); break;
    case DType::kU8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case DType::kBool: *static_cast<uint8_t*>(p) = v != 0.f; break;
    case DType::kCount: break;
  }
}
}  // namespace

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype,
                            int64_t offset_elems) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->offset = offset_elems;
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  for (int64_t d : shape) LATHE_CHECK_ARG(d >= 0, "[empty] negative dimension in shape ", shape_str(shape));
  return from_storage(Storage::allocate(static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype)), shape,
                      dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (t.nbytes()) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::from_data(const Shape& shape, const std::vector<float>& values) {
  LATHE_CHECK_ARG(shape_numel(shape) == static_cast<int64_t>(values.size()), "[from_data] shape ",
                  shape_str(shape), " needs ", shape_numel(shape), " values, got ", values.size());
  Tensor t = empty(shape, DType::kF32);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * 4);  // no storage when empty
  return t;
}

Tensor Tensor::from_data_i32(const Shape& shape, const std::vector<int32_t>& values) {
  LATHE_CHECK_ARG(shape_numel(shape) == static_cast<int64_t>(values.size()), "[from_data_i32] shape ",
                  shape_str(shape), " needs ", shape_numel(shape), " values, got ", values.size());
  Tensor t = empty(shape, DType::kI32);
  if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * 4);  // no storage when empty
  return t;
}

const Shape& Tensor::shape() const { return impl_->shape; }
const Shape& Tensor::strides() const { return impl_->strides; }
DType Tensor::dtype() const { return impl_->dtype; }
int64_t Tensor::offset() const { return impl_->offset; }
int64_t Tensor::numel() const { return shape_numel(impl_->shape); }
const std::shared_ptr<Storage>& Tensor::storage() const { return impl_->storage; }

int64_t Tensor::size(int d) const {
  const int n = dim();
  if (d < 0) d += n;
  LATHE_CHECK_ARG(d >= 0 && d < n, "dimension ", d, " out of range for shape ", shape_str(shape()));
  return impl_->shape[d];
}

// Row-major packed. A size-1 dimension never moves the address, so its stride does not matter (as in
// PyTorch): a prefix [1, S, ...] sliced from [1, capacity, ...] is contiguous and can be read in place.
bool Tensor::is_contiguous() const {
  if (numel() <= 1) return true;
  int64_t expect = 1;
  for (size_t i = impl_->shape.size(); i-- > 0;) {
    if (impl_->shape[i] == 1) continue;
    if (impl_->strides[i] != expect) return false;
    expect *= impl_->shape[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl_->storage->data) + impl_->offset * static_cast<int64_t>(dtype_size(dtype()));
}

float Tensor::item() const {
  LATHE_CHECK_ARG(numel() == 1, "[item] tensor has ", numel(), " elements, shape ", shape_str(shape()));
  return load_as_float(raw_data(), dtype());
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out;
  out.reserve(numel());
  const size_t es = dtype_size(dtype());
  const char* base = static_cast<const char*>(raw_data());
  if (is_contiguous() && dtype() == DType::kF32) {
    const float* p = static_cast<const float*>(raw_data());
    return std::vector<float>(p, p + numel());
  }
  const Shape& st = strides();
  for_each_index(shape(), [&](const int64_t* idx) {
    int64_t off = 0;
    for (int d = 0; d < dim(); ++d) off += idx[d] * st[d];
    out.push_back(load_as_float(base + off * es, dtype()));
  });
  return out;
}

Tensor Tensor::view(const Shape& new_shape) const {
  LATHE_CHECK_ARG(is_contiguous(), "[view] tensor with shape ", shape_str(shape()), " is not contiguous");
  Shape s = new_shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      LATHE_CHECK_ARG(infer < 0, "[view] more than one -1 in ", shape_str(new_shape));
      infer = static_cast<int>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) s[infer] = known ? numel() / known : 0;
  LATHE_CHECK_ARG(shape_numel(s) == numel(), "[view] cannot view shape ", shape_str(shape()), " as ",
                  shape_str(new_shape));
  auto impl = std::make_shared<TensorImpl>(*impl_);
  impl->shape = s;
  impl->strides = contiguous_strides(s);
  impl->grad = Tensor();
  impl->grad_fn = nullptr;
  impl->requires_grad = false;
  return Tensor(std::move(impl));
}

Tensor Tensor::slice(int d, int64_t begin, int64_t end) const {
  if (d < 0) d += dim();
  LATHE_CHECK_ARG(d >= 0 && d < dim() && begin >= 0 && begin <= end && end <= shape()[d], "[slice] range [",
                  begin, ", ", end, ") of dim ", d, " out of shape ", shape_str(shape()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->dtype = impl_->dtype;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->offset = impl_->offset + begin * impl_->strides[d];
  impl->shape[d] = end - begin;
  return Tensor(std::move(impl));
}

Tensor Tensor::select(int d, int64_t index) const {
  if (d < 0) d += dim();
  Tensor s = slice(d, index, index + 1);
  s.impl_->shape.erase(s.impl_->shape.begin() + d);
  s.impl_->strides.erase(s.impl_->strides.begin() + d);
  return s;
}

Tensor Tensor::transpose(int d0, int d1) const {
  if (d0 < 0) d0 += dim();
  if (d1 < 0) d1 += dim();
  LATHE_CHECK_ARG(d0 >= 0 && d1 >= 0 && d0 < dim() && d1 < dim(), "[transpose] dims ", d0, ", ", d1,
                  " out of range for ", shape_str(shape()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->dtype = impl_->dtype;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  std::swap(impl->shape[d0], impl->shape[d1]);
  std::swap(impl->strides[d0], impl->strides[d1]);
  return Tensor(std::move(impl));
}

void Tensor::copy_from(const Tensor& src) {
  LATHE_CHECK_ARG(src.shape() == shape(), "[copy_from] shape ", shape_str(src.shape()), " into ",
                  shape_str(shape()));
  LATHE_CHECK_ARG(!storage()->read_only, "[copy_from] destination is a read-only mapping");
  if (src.dtype() == dtype() && src.is_contiguous() && is_contiguous()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
    return;
  }
  const size_t es_src = dtype_size(src.dtype()), es_dst = dtype_size(dtype());
  const char* sb = static_cast<const char*>(src.raw_data());
  char* db = static_cast<char*>(raw_data());
  const Shape &ss = src.strides(), &ds = strides();
  const bool same = src.dtype() == dtype();
  // Integer to integer stays exact (token ids above 2^24 would not survive a float).
  const bool ints = dtype_is_integer(src.dtype()) && dtype_is_integer(dtype());
  for_each_index(shape(), [&](const int64_t* idx) {
    int64_t so = 0, dof = 0;
    for (int d = 0; d < dim(); ++d) {
      so += idx[d] * ss[d];
      dof += idx[d] * ds[d];
    }
    if (same)
      std::memcpy(db + dof * es_dst, sb + so * es_src, es_dst);
    else if (ints)
      store_from_i64(db + dof * es_dst, dtype(), load_as_i64(sb + so * es_src, src.dtype()));
    else
      store_from_float(db + dof * es_dst, dtype(), load_as_float(sb + so * es_src, src.dtype()));
  });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype() && is_contiguous()) return *this;
  Tensor t = empty(shape(), dt);
  t.copy_from(*this);
  return t;
}

void Tensor::fill(float value) {
  LATHE_CHECK_ARG(is_contiguous(), "[fill] tensor is not contiguous");
  if (dtype() == DType::kF32) {
    float* p = data<float>();
    for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
    return;
  }
  const size_t es = dtype_size(dtype());
  char* p = static_cast<char*>(raw_data());
  for (int64_t i = 0, n = numel(); i < n; ++i) store_from_float(p + i * es, dtype(), value);
}

bool Tensor::requires_grad() const { return impl_ && impl_->requires_grad; }
Tensor& Tensor::set_requires_grad(bool on) {
  impl_->requires_grad = on;
  return *this;
}
Tensor Tensor::grad() const { return impl_->grad; }
void Tensor::zero_grad() { impl_->grad = Tensor(); }
const std::shared_ptr<Node>& Tensor::grad_fn() const { return impl_->grad_fn; }

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->strides = impl_->strides;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

}  // namespace lathe
