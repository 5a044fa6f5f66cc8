// linear / linear_pair over nn Linear (see linear.h).
#include "lathe/nn/linear.h"

#include "lathe/base/error.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"

namespace lathe {
namespace {
bool uses_bf16_copy(const Linear& l, const ForwardOptions& o) { return o.bf16 && l.bf16.defined(); }
bool uses_lora(const Linear& l, const ForwardOptions& o) { return o.lora && l.lora.defined(); }
}  // namespace

Tensor linear_weight(const Linear& l, const ForwardOptions& o) {
  return uses_bf16_copy(l, o) ? bf16_compute_weight(l.weight, l.bf16) : l.weight;
}

Tensor linear_input(const Tensor& x, const Linear& l, const ForwardOptions& o) {
  return uses_bf16_copy(l, o) && x.dtype() != DType::kBF16 ? to_bf16(x) : x;
}

Tensor linear(const Tensor& x, const Linear& l, const ForwardOptions& o) {
  const Tensor xin = linear_input(x, l, o);
  const Tensor y = linear(xin, linear_weight(l, o), l.bias);
  return uses_lora(l, o) ? add(y, lora_delta(xin, l.lora, o)) : y;
}

std::pair<Tensor, Tensor> linear_pair(const Tensor& x, const Linear& a, const Linear& b, const ForwardOptions& o) {
  LATHE_ASSERT(uses_bf16_copy(a, o) == uses_bf16_copy(b, o), "[linear_pair] the two Linears are in different formats");
  const Tensor xin = linear_input(x, a, o);
  auto [ya, yb] = linear_pair(xin, linear_weight(a, o), linear_weight(b, o), a.bias, b.bias);
  if (uses_lora(a, o)) ya = add(ya, lora_delta(xin, a.lora, o));
  if (uses_lora(b, o)) yb = add(yb, lora_delta(xin, b.lora, o));
  return {ya, yb};
}

}  // namespace lathe
