// Format names and the shape checks of a QuantWeight.
#include "lathe/tensor/quant_weight.h"

#include "lathe/base/error.h"

namespace lathe {

QuantSpec parse_quant_spec(std::string_view name) {
  if (name == "int8") return {QuantFormat::kInt8, 32};
  if (name == "int4") return {QuantFormat::kInt4, 32};
  if (name == "int4-g32") return {QuantFormat::kInt4Asym, 32};
  if (name == "int4-g64") return {QuantFormat::kInt4Asym, 64};
  if (name == "int4-g128") return {QuantFormat::kInt4Asym, 128};
  throw InvalidArgument(
      str_cat("unknown quantisation format '", name, "' (expected int8, int4, int4-g32, int4-g64 or int4-g128)"));
}

std::string quant_spec_name(const QuantSpec& s) {
  switch (s.format) {
    case QuantFormat::kInt8:
      return "int8";
    case QuantFormat::kInt4:
      return "int4";
    case QuantFormat::kInt4Asym:
      return "int4-g" + std::to_string(s.group);
    case QuantFormat::kCount:
      break;
  }
  return "?";
}

void check_quant_spec(const QuantSpec& s) {
  const bool ok = s.format == QuantFormat::kInt4Asym ? (s.group == 32 || s.group == 64 || s.group == 128)
                                                     : (s.format < QuantFormat::kCount && s.group == 32);
  LATHE_CHECK_ARG(ok, "[quantize] format ", quant_spec_name(s), " does not take group size ", s.group);
}

void QuantWeight::check(const std::string& where) const {
  check_quant_spec(spec);
  LATHE_CHECK_ARG(out > 0 && in > 0 && in % spec.group == 0, where, ": quantised weight [", out, ", ", in,
                  "] needs in to be a multiple of the group size ", spec.group);
  const DType code_type = spec.format == QuantFormat::kInt8 ? DType::kI8 : DType::kU8;
  const Shape code_shape = {out, quant_row_bytes(spec.format, in)}, scale_shape = {out, in / spec.group};
  LATHE_CHECK_ARG(codes.defined() && codes.dtype() == code_type && codes.shape() == code_shape && codes.is_contiguous(),
                  where, ": ", quant_spec_name(spec), " codes must be contiguous ", dtype_name(code_type), " ",
                  shape_str(code_shape), ", got ",
                  codes.defined() ? str_cat(dtype_name(codes.dtype()), " ", shape_str(codes.shape())) : "none");
  const auto check_f16 = [&](const Tensor& t, const char* what) {
    LATHE_CHECK_ARG(t.defined() && t.dtype() == DType::kF16 && t.shape() == scale_shape && t.is_contiguous(), where,
                    ": ", quant_spec_name(spec), " ", what, " must be contiguous f16 ", shape_str(scale_shape),
                    ", got ", t.defined() ? str_cat(dtype_name(t.dtype()), " ", shape_str(t.shape())) : "none");
  };
  check_f16(scales, "scales");
  if (quant_has_mins(spec.format))
    check_f16(mins, "mins");
  else
    LATHE_CHECK_ARG(!mins.defined(), where, ": ", quant_spec_name(spec), " has no mins");
}

}  // namespace lathe
