// NF4 folder I/O (see nf4_checkpoint.h).
#include "lathe/models/nf4_checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "lathe/base/error.h"
#include "lathe/ops/quant_linear.h"
#include "lathe/ref/nf4.h"

namespace lathe {
namespace {

constexpr const char *kStateSuffix = ".quant_state.bitsandbytes__nf4";

Tensor bytes_tensor(const std::string &s) {
  Tensor t = Tensor::empty({static_cast<int64_t>(s.size())}, DType::kU8);
  std::memcpy(t.raw_data(), s.data(), s.size());
  return t;
}

Tensor f32_tensor(const float *v, int64_t n) {
  Tensor t = Tensor::empty({n});
  std::memcpy(t.raw_data(), v, static_cast<size_t>(n) * sizeof(float));
  return t;
}

}  // namespace

std::string python_float_repr(double v) {
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v,
                               std::chars_format::scientific);  // shortest: d.ddde±XX
  const std::string sci(buf, r.ptr);
  const size_t e = sci.find('e');
  const int exp10 = std::stoi(sci.substr(e + 1));
  std::string digits = sci.substr(0, e);
  const bool neg = digits[0] == '-';
  if (neg) digits.erase(0, 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out;
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp10 + 1) {
      out = digits + std::string(static_cast<size_t>(exp10 + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp10 + 1)) + "." + digits.substr(static_cast<size_t>(exp10 + 1));
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "") + "e" + (exp10 < 0 ? "-" : "+") +
          (std::abs(exp10) < 10 ? "0" : "") + std::to_string(std::abs(exp10));
  }
  return neg ? "-" + out : out;
}

std::string nf4_quant_state_json(const QuantWeight &q) {
  std::string s = str_cat("{\"quant_type\": \"nf4\", \"blocksize\": ", q.spec.group, ", \"dtype\": \"", q.nf4.dtype,
                          "\", \"shape\": [", q.out, ", ", q.in, "]");
  if (q.nf4.nested)
    s += str_cat(
        ", \"nested_blocksize\": ", q.nf4.nested_blocksize,
        ", \"nested_dtype\": \"float32\", \"nested_offset\": ", python_float_repr(static_cast<double>(q.nf4.offset)));
  return s + "}";
}

void append_nf4_tensors(const std::string &name, const QuantWeight &q,
                        std::vector<std::pair<std::string, Tensor>> &out) {
  out.push_back({name, q.codes});
  out.push_back({name + ".absmax", q.nf4.absmax});
  out.push_back({name + ".quant_map", f32_tensor(ref::kNf4Code, 16)});
  if (q.nf4.nested) {
    out.push_back({name + ".nested_absmax", q.nf4.nested_absmax});
    out.push_back({name + ".nested_quant_map", q.nf4.nested_quant_map});
  }
  out.push_back({name + kStateSuffix, bytes_tensor(nf4_quant_state_json(q))});
}

QuantWeight read_nf4_weight(const CheckpointReader &ckpt, const std::string &name, const Shape &shape,
                            std::set<std::string> &used) {
  const std::string where = str_cat(ckpt.file_of(name), ": '", name, "'");
  const auto part = [&](const std::string &suffix) {
    LATHE_CHECK_ARG(ckpt.contains(name + suffix), where, " is NF4 but has no '", name, suffix, "'");
    used.insert(name + suffix);
    return ckpt.tensor(name + suffix);
  };
  const Tensor state_bytes = part(kStateSuffix).contiguous();
  LATHE_CHECK_ARG(state_bytes.dtype() == DType::kU8, where, ": quant_state must be U8 JSON bytes");
  const std::string text(static_cast<const char *>(state_bytes.raw_data()), static_cast<size_t>(state_bytes.numel()));
  nlohmann::json st;
  try {
    st = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception &e) {
    throw InvalidArgument(str_cat(where, ": quant_state is not JSON (", e.what(), ")"));
  }
  LATHE_CHECK_ARG(st.is_object() && st.value("quant_type", std::string()) == "nf4", where,
                  ": quant_state quant_type must be \"nf4\", got ", text);
  LATHE_CHECK_ARG(st.contains("blocksize") && st["blocksize"].is_number_integer(), where,
                  ": quant_state has no integer blocksize");
  const std::vector<int64_t> st_shape = st.value("shape", std::vector<int64_t>{});
  LATHE_CHECK_ARG(Shape(st_shape.begin(), st_shape.end()) == shape, where, ": quant_state shape ",
                  st.value("shape", nlohmann::json()).dump(), " is not the model's ", shape_str(shape));
  const Tensor qmap = part(".quant_map").contiguous();
  LATHE_CHECK_ARG(qmap.dtype() == DType::kF32 && qmap.numel() == 16, where, ": quant_map must be f32 [16]");
  for (int i = 0; i < 16; ++i)
    LATHE_CHECK_ARG(qmap.data<float>()[i] == ref::kNf4Code[i], where, ": quant_map is not the NF4 code (entry ", i,
                    " is ", qmap.data<float>()[i], ")");
  Nf4Stats s;
  s.dtype = st.value("dtype", std::string("float32"));
  s.absmax = part(".absmax");
  s.nested = ckpt.contains(name + ".nested_absmax");
  if (s.nested) {
    s.nested_absmax = part(".nested_absmax");
    s.nested_quant_map = part(".nested_quant_map");
    LATHE_CHECK_ARG(st.contains("nested_offset") && st["nested_offset"].is_number(), where,
                    ": nested quant_state has no nested_offset");
    s.offset = st["nested_offset"].get<float>();
    s.nested_blocksize = st.value("nested_blocksize", int64_t{256});
    LATHE_CHECK_ARG(s.nested_blocksize > 0, where, ": nested_blocksize must be positive");
  }
  used.insert(name);
  return nf4_weight(shape[0], shape[1], st["blocksize"].get<int64_t>(), ckpt.tensor(name), std::move(s), where);
}

nlohmann::json bnb_nf4_quantization_config(const std::string &compute_dtype, const std::vector<std::string> &skipped) {
  nlohmann::json skip = skipped.empty() ? nlohmann::json() : nlohmann::json(skipped);
  return {{"_load_in_4bit", true},
          {"_load_in_8bit", false},
          {"bnb_4bit_compute_dtype", compute_dtype},
          {"bnb_4bit_quant_storage", "uint8"},
          {"bnb_4bit_quant_type", "nf4"},
          {"bnb_4bit_use_double_quant", true},
          {"llm_int8_enable_fp32_cpu_offload", false},
          {"llm_int8_has_fp16_weight", false},
          {"llm_int8_skip_modules", skip},
          {"llm_int8_threshold", 6.0},
          {"load_in_4bit", true},
          {"load_in_8bit", false},
          {"quant_method", "bitsandbytes"}};
}

}  // namespace lathe
