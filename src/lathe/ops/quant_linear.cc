// quantize_weight / dequantize_weight / linear over a QuantWeight: validate, size, call the CPU kernels.
#include "lathe/ops/quant_linear.h"

#include <cstring>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/base/context.h"
#include "lathe/ref/quant.h"

namespace lathe {
namespace {
cpu::QuantMatrix view_of(const QuantWeight& w) {
  return {w.spec,
          w.out,
          w.in,
          static_cast<const uint8_t*>(w.codes.raw_data()),
          w.scales.data<f16>(),
          w.mins.defined() ? w.mins.data<f16>() : nullptr};
}
}  // namespace

QuantWeight quantize_weight(const Tensor& w_in, const QuantSpec& spec) {
  check_quant_spec(spec);
  LATHE_CHECK_ARG(w_in.dim() == 2 && dtype_is_float(w_in.dtype()),
                  "[quantize] weight must be 2-D [out, in] f32, bf16 or f16, got ", dtype_name(w_in.dtype()), " ",
                  shape_str(w_in.shape()));
  const int64_t out = w_in.size(0), in = w_in.size(1);
  LATHE_CHECK_ARG(in > 0 && in % spec.group == 0, "[quantize] weight ", shape_str(w_in.shape()), ": its input size ",
                  in, " is not a multiple of the group size ", spec.group, " of format ", quant_spec_name(spec),
                  " (skip this weight, or pick a format whose group divides it)");
  const Tensor w = w_in.dtype() == DType::kF32 ? w_in.contiguous() : w_in.to(DType::kF32).contiguous();
  QuantWeight q;
  q.spec = spec;
  q.out = out;
  q.in = in;
  const int64_t row_bytes = quant_row_bytes(spec.format, in), groups = in / spec.group;
  q.codes = Tensor::empty({out, row_bytes}, spec.format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8);
  q.scales = Tensor::empty({out, groups}, DType::kF16);
  if (quant_has_mins(spec.format)) q.mins = Tensor::empty({out, groups}, DType::kF16);
  uint8_t* codes = static_cast<uint8_t*>(q.codes.raw_data());
  f16* scales = q.scales.data<f16>();
  f16* mins = q.mins.defined() ? q.mins.data<f16>() : nullptr;
  const float* src = w.data<float>();
  current_context().pool.parallel_for(out, [&](int64_t j, int) {
    ref::quantize_row(spec, src + j * in, in, codes + j * row_bytes, scales + j * groups,
                      mins ? mins + j * groups : nullptr);
  });
  return q;
}

Tensor dequantize_weight(const QuantWeight& w) {
  w.check("[dequantize]");
  Tensor out = Tensor::empty({w.out, w.in});
  const cpu::QuantMatrix m = view_of(w);
  float* dst = out.data<float>();
  current_context().pool.parallel_for(w.out,
                                      [&](int64_t j, int) { cpu::quant_dequantize_rows(m, j, j + 1, dst + j * w.in); });
  return out;
}

Tensor linear(const Tensor& x_in, const QuantWeight& w, const Tensor& b) {
  LATHE_CHECK_ARG(w.defined(), "[linear] the quantised weight is empty");
  LATHE_CHECK_ARG(
      x_in.dim() >= 1 && x_in.size(-1) == w.in && (x_in.dtype() == DType::kF32 || x_in.dtype() == DType::kBF16),
      "[linear] input ", dtype_name(x_in.dtype()), " ", shape_str(x_in.shape()),
      " does not match the quantised weight [out, in] = [", w.out, ", ", w.in, "] (f32 input)");
  LATHE_CHECK_ARG(!b.defined() || (b.dim() == 1 && b.size(0) == w.out && b.dtype() == DType::kF32),
                  "[linear] bias must be f32 [", w.out, "], got ", b.defined() ? shape_str(b.shape()) : "");
  if (needs_grad({&x_in, &b}))
    throw NotImplemented(
        "[linear] gradients through a quantised weight are not implemented (inference only; "
        "training on a quantised base, QLoRA, is a later part of issue 15)");
  const Tensor x = (x_in.dtype() == DType::kF32 ? x_in : x_in.to(DType::kF32)).contiguous();
  const int64_t n = x.numel() / w.in;
  Shape out_shape = x.shape();
  out_shape.back() = w.out;
  Tensor y = Tensor::empty(out_shape);
  float* yp = y.data<float>();
  if (b.defined()) {  // seed every row with the bias; the kernel accumulates onto it
    const Tensor bc = b.contiguous();
    for (int64_t r = 0; r < n; ++r) std::memcpy(yp + r * w.out, bc.data<float>(), w.out * sizeof(float));
  }
  cpu::quant_gemm(n, x.data<float>(), w.in, view_of(w), yp, w.out, b.defined(), current_context().pool);
  return y;
}

}  // namespace lathe
