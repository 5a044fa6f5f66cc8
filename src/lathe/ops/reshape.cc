#include "lathe/ops/reshape.h"

#include "lathe/autograd/node.h"

namespace lathe {

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.contiguous().view(shape);
  if (needs_grad({&x})) {
    const Shape in_shape = x.shape();
    record(y, "reshape", {x}, [in_shape](const Tensor& g) -> std::vector<Tensor> {
      return {g.contiguous().view(in_shape)};
    });
  }
  return y;
}

}  // namespace lathe
