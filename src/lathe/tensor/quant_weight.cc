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
  if (name == "int6") return {QuantFormat::kInt6, 32};
  if (name == "nf4") return {QuantFormat::kNf4, 64};
  throw InvalidArgument(str_cat("unknown quantisation format '", name,
                                "' (expected int8, int4, int4-g32, int4-g64, int4-g128, int6 or nf4)"));
}

std::string quant_spec_name(const QuantSpec& s) {
  switch (s.format) {
    case QuantFormat::kInt8:
      return "int8";
    case QuantFormat::kInt4:
      return "int4";
    case QuantFormat::kInt4Asym:
      return "int4-g" + std::to_string(s.group);
    case QuantFormat::kInt6:
      return "int6";
    case QuantFormat::kNf4:
      return s.group == 64 ? "nf4" : "nf4-b" + std::to_string(s.group);
    case QuantFormat::kCount:
      break;
  }
  return "?";
}

void check_quant_spec(const QuantSpec& s) {
  if (s.format == QuantFormat::kNf4) {  // bitsandbytes' blocksizes: powers of 2 from 32 to 4096
    LATHE_CHECK_ARG(s.group >= 32 && s.group <= 4096 && (s.group & (s.group - 1)) == 0, "[quantize] nf4 blocksize ",
                    s.group, " is not a power of 2 in [32, 4096]");
    return;
  }
  const bool ok = s.format == QuantFormat::kInt4Asym ? (s.group == 32 || s.group == 64 || s.group == 128)
                                                     : (s.format < QuantFormat::kCount && s.group == 32);
  LATHE_CHECK_ARG(ok, "[quantize] format ", quant_spec_name(s), " does not take group size ", s.group);
}

namespace {
void check_tensor(const Tensor& t, DType dtype, const Shape& shape, const std::string& where, const std::string& what) {
  LATHE_CHECK_ARG(t.defined() && t.dtype() == dtype && t.shape() == shape && t.is_contiguous(), where, ": ", what,
                  " must be contiguous ", dtype_name(dtype), " ", shape_str(shape), ", got ",
                  t.defined() ? str_cat(dtype_name(t.dtype()), " ", shape_str(t.shape())) : "none");
}

void check_nf4(const QuantWeight& w, const std::string& where) {
  LATHE_CHECK_ARG(w.out > 0 && w.in > 0, where, ": nf4 weight [", w.out, ", ", w.in, "] is empty");
  const int64_t numel = w.out * w.in, blocks = nf4_blocks(numel, w.spec.group);
  check_tensor(w.codes, DType::kU8, {(numel + 1) / 2, 1}, where, "nf4 codes (weight)");
  check_tensor(w.scales, DType::kF32, {blocks}, where, "nf4 block absmax");
  LATHE_CHECK_ARG(!w.mins.defined(), where, ": nf4 has no mins");
  const Nf4Stats& s = w.nf4;
  if (!s.nested) {
    check_tensor(s.absmax, DType::kF32, {blocks}, where, "nf4 weight.absmax");
    return;
  }
  check_tensor(s.absmax, DType::kU8, {blocks}, where, "nf4 weight.absmax (double-quantised)");
  check_tensor(s.nested_absmax, DType::kF32, {nf4_blocks(blocks, s.nested_blocksize)}, where,
               "nf4 weight.nested_absmax");
  check_tensor(s.nested_quant_map, DType::kF32, {256}, where, "nf4 weight.nested_quant_map");
}
}  // namespace

void QuantWeight::check(const std::string& where) const {
  check_quant_spec(spec);
  if (spec.format == QuantFormat::kNf4) return check_nf4(*this, where);
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
