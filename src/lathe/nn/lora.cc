// lora_delta (see lora.h): composed from ops that carry their own gradient rules.
#include "lathe/nn/lora.h"

#include "lathe/base/rng.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/dropout.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"

namespace lathe {

LowRankTerm lora_term(const Tensor& x, const LoraAdapter& l, const ForwardOptions& o) {
  const Tensor xd =
      o.lora_dropout && l.dropout > 0.f ? dropout(x, l.dropout, derive_key(o.dropout_key, l.dropout_stream)) : x;
  return {xd, xd.dtype() == DType::kBF16 ? to_bf16(l.a) : l.a, l.b, l.scaling};
}

Tensor lora_delta(const Tensor& x, const LoraAdapter& l, const ForwardOptions& o) {
  const LowRankTerm t = lora_term(x, l, o);
  // scaling applied to the [..., R] product, not to the [..., out] result: fewer multiplies, same maths.
  const Tensor h = scale(linear(t.x, t.a), t.scaling);  // [..., R]
  return linear(h, t.b);                                // [..., out]
}

}  // namespace lathe
