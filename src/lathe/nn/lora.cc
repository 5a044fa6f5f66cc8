// lora_delta (see lora.h): composed from ops that carry their own gradient rules.
#include "lathe/nn/lora.h"

#include "lathe/base/rng.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/dropout.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"

namespace lathe {

Tensor lora_delta(const Tensor& x, const LoraAdapter& l, const ForwardOptions& o) {
  const Tensor xd =
      o.lora_dropout && l.dropout > 0.f ? dropout(x, l.dropout, derive_key(o.dropout_key, l.dropout_stream)) : x;
  const Tensor a = xd.dtype() == DType::kBF16 ? to_bf16(l.a) : l.a;
  // scaling applied to the [..., R] product, not to the [..., out] result: fewer multiplies, same maths.
  const Tensor h = scale(linear(xd, a), l.scaling);  // [..., R]
  return linear(h, l.b);                             // [..., out]
}

}  // namespace lathe
