// linear / linear_pair over nn Linear (see linear.h).
#include "lathe/nn/linear.h"

#include <optional>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/error.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace {
bool uses_bf16_copy(const Linear& l, const ForwardOptions& o) { return o.bf16 && l.bf16.defined(); }
bool uses_lora(const Linear& l, const ForwardOptions& o) { return o.lora && l.lora.defined(); }

// A bf16 weight multiplies bf16 inputs: the compute copy in bf16 training, and a bf16 checkpoint's own
// weight where the CPU has a fast bf16 dot product (twice the f32 FMA rate: prefill and batched decode run
// on it), as llama.cpp rounds activations to its weights' 16-bit type. Elsewhere f32 x meets the widened
// bf16 weight exactly.
bool rounds_input_to_bf16(const Linear& l, const ForwardOptions& o) {
  if (l.quant.defined()) return false;  // the quantised kernels take f32 x
  return uses_bf16_copy(l, o) || (l.weight.dtype() == DType::kBF16 && cpu::gemm_has_fast_bf16_dot());
}

// y [N, out] += each run's served-adapter term on its rows of x [N, in]. Nothing to do (the common case:
// no served adapters, or a Linear no adapter covers) costs two emptiness tests.
void add_lora_rows(Tensor& y, const Tensor& x, const Linear& l, const ForwardOptions& o) {
  if (o.lora_rows.empty() || l.lora_slots.empty()) return;
  LATHE_CHECK_ARG(x.dim() == 2 && y.dim() == 2 && y.is_contiguous(), "[linear] served LoRA adapters need x [N, in], got ",
                  shape_str(x.shape()));
  LATHE_CHECK_ARG(!(grad_enabled() && y.requires_grad()),
                  "[linear] served LoRA adapters are inference-only (run the forward under NoGradGuard)");
  for (const LoraRowRun& r : o.lora_rows) {
    if (r.slot <= 0 || r.slot >= static_cast<int32_t>(l.lora_slots.size())) continue;
    const LoraAdapter& a = l.lora_slots[static_cast<size_t>(r.slot)];
    if (!a.defined()) continue;
    LATHE_CHECK_ARG(0 <= r.begin && r.begin < r.end && r.end <= y.size(0), "[linear] LoRA row run [", r.begin, ", ",
                    r.end, ") is outside the ", y.size(0), " rows");
    Tensor rows = y.slice(0, r.begin, r.end);  // contiguous: whole rows of a contiguous y
    rows.copy_from(add(rows, lora_delta(x.slice(0, r.begin, r.end), a, o)));
  }
}

// A quantised Linear: y = x · deq(W)ᵀ + b (+ its own adapter's term: QLoRA, gradients to A, B and x, none to
// the frozen W), plus the served adapters. f32 compute: the quantised kernels take f32 x.
Tensor quant_linear(const Tensor& x, const Linear& l, const ForwardOptions& o) {
  Tensor y = uses_lora(l, o) ? linear(x, l.quant, l.bias, lora_term(x, l.lora, o)) : linear(x, l.quant, l.bias);
  add_lora_rows(y, x, l, o);
  return y;
}
}  // namespace

Tensor linear_weight(const Linear& l, const ForwardOptions& o) {
  if (l.quant.defined()) return dequantize_weight(l.quant);
  return uses_bf16_copy(l, o) ? bf16_compute_weight(l.weight, l.bf16) : l.weight;
}

Tensor linear_input(const Tensor& x, const Linear& l, const ForwardOptions& o) {
  return rounds_input_to_bf16(l, o) && x.dtype() != DType::kBF16 ? to_bf16(x) : x;
}

Tensor linear(const Tensor& x, const Linear& l, const ForwardOptions& o) {
  if (l.quant.defined()) return quant_linear(x, l, o);
  const Tensor xin = linear_input(x, l, o);
  Tensor y = uses_lora(l, o) ? linear(xin, linear_weight(l, o), l.bias, lora_term(xin, l.lora, o))
                             : linear(xin, linear_weight(l, o), l.bias);
  add_lora_rows(y, xin, l, o);
  return y;
}

std::pair<Tensor, Tensor> linear_pair(const Tensor& x, const Linear& a, const Linear& b, const ForwardOptions& o) {
  // Quantised: each GEMV already keeps every worker busy on W's rows.
  if (a.quant.defined() || b.quant.defined()) return {linear(x, a, o), linear(x, b, o)};
  LATHE_ASSERT(uses_bf16_copy(a, o) == uses_bf16_copy(b, o) && rounds_input_to_bf16(a, o) == rounds_input_to_bf16(b, o),
               "[linear_pair] the two Linears are in different formats");
  const Tensor xin = linear_input(x, a, o);
  const std::optional<LowRankTerm> ta = uses_lora(a, o) ? std::optional(lora_term(xin, a.lora, o)) : std::nullopt;
  const std::optional<LowRankTerm> tb = uses_lora(b, o) ? std::optional(lora_term(xin, b.lora, o)) : std::nullopt;
  auto [ya, yb] = linear_pair(xin, linear_weight(a, o), linear_weight(b, o), a.bias, b.bias, ta ? &*ta : nullptr,
                              tb ? &*tb : nullptr);
  add_lora_rows(ya, xin, a, o);
  add_lora_rows(yb, xin, b, o);
  return {ya, yb};
}

}  // namespace lathe
