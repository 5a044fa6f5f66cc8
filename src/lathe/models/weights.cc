#include "lathe/models/weights.h"

#include "lathe/base/error.h"

namespace lathe {
namespace {
void check_shape(const std::string& name, const Tensor& t, const Shape& want) {
  LATHE_CHECK_ARG(t.shape() == want, "tensor '", name, "' has shape ", shape_str(t.shape()), ", the config implies ",
                  shape_str(want));
}
Shape reversed(const Shape& s) { return Shape(s.rbegin(), s.rend()); }
}  // namespace

TensorBinding bind(const std::string& name, Tensor& slot, const Shape& shape, ParamRole role, int layer) {
  TensorBinding b{name, shape, nullptr, nullptr, {&slot}, role, layer};
  b.load = [name, shape, &slot](const Tensor& src) {
    check_shape(name, src, shape);
    slot = src;
  };
  b.save = [&slot]() { return slot; };
  return b;
}

TensorBinding bind_transposed(const std::string& name, Tensor& slot, const Shape& our_shape, ParamRole role,
                              int layer) {
  const Shape shape = reversed(our_shape);
  TensorBinding b{name, shape, nullptr, nullptr, {&slot}, role, layer};
  b.load = [name, shape, &slot](const Tensor& src) {
    check_shape(name, src, shape);
    slot = src.transpose(0, 1).contiguous();
  };
  b.save = [&slot]() { return slot.transpose(0, 1).contiguous(); };
  b.transposed = true;
  return b;
}

TensorBinding bind_concat(const std::string& name, const ConcatParts& cp, ParamRole role, int layer) {
  const std::vector<Tensor*>& parts = cp.parts;
  const std::vector<Shape>& part_shapes = cp.shapes;
  const bool transposed = cp.transposed;
  Shape cat = part_shapes[0];
  cat[0] = 0;
  for (const Shape& s : part_shapes) cat[0] += s[0];
  const Shape shape = transposed ? reversed(cat) : cat;
  TensorBinding b{name, shape, nullptr, nullptr, parts, role, layer};
  b.load = [name, shape, parts, part_shapes, transposed](const Tensor& src) {
    check_shape(name, src, shape);
    Tensor whole = transposed ? src.transpose(0, 1).contiguous() : src;
    int64_t row = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      *parts[i] = whole.slice(0, row, row + part_shapes[i][0]);
      row += part_shapes[i][0];
    }
  };
  b.save = [parts, cat, transposed]() {
    Tensor whole = Tensor::empty(cat, parts[0]->dtype());
    int64_t row = 0;
    for (Tensor* p : parts) {
      whole.slice(0, row, row + p->size(0)).copy_from(*p);
      row += p->size(0);
    }
    return transposed ? whole.transpose(0, 1).contiguous() : whole;
  };
  b.transposed = transposed;
  return b;
}

TensorBinding bind_stacked(const std::string& name, Tensor& stack, int64_t index, int64_t n, const Shape& part_shape,
                           ParamRole role, int layer) {
  Shape full = part_shape;
  full.insert(full.begin(), n);
  TensorBinding b{name, part_shape, nullptr, nullptr, {&stack}, role, layer};
  b.load = [name, part_shape, full, index, &stack](const Tensor& src) {
    check_shape(name, src, part_shape);
    if (!stack.defined() || stack.shape() != full || stack.dtype() != src.dtype() || stack.storage()->read_only)
      stack = Tensor::zeros(full, src.dtype());
    stack.select(0, index).copy_from(src);
  };
  b.save = [index, &stack]() { return stack.select(0, index).contiguous(); };
  return b;
}

TensorBinding bind_concat_dim1(const std::string& name, Tensor& a, Tensor& b_slot, const Shape& part_shape,
                               ParamRole role, int layer) {
  Shape shape = part_shape;
  shape[1] *= 2;
  TensorBinding b{name, shape, nullptr, nullptr, {&a, &b_slot}, role, layer};
  b.load = [name, shape, part_shape, &a, &b_slot](const Tensor& src) {
    check_shape(name, src, shape);
    a = src.slice(1, 0, part_shape[1]).contiguous();
    b_slot = src.slice(1, part_shape[1], 2 * part_shape[1]).contiguous();
  };
  b.save = [shape, part_shape, &a, &b_slot]() {
    Tensor whole = Tensor::empty(shape, a.dtype());
    whole.slice(1, 0, part_shape[1]).copy_from(a);
    whole.slice(1, part_shape[1], 2 * part_shape[1]).copy_from(b_slot);
    return whole;
  };
  return b;
}

}  // namespace lathe
