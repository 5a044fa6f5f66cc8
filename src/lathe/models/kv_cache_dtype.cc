// KvCacheDtype: parsing, names, and auto resolved from the model's weights.
#include "lathe/models/kv_cache_dtype.h"

#include "lathe/base/error.h"
#include "lathe/models/weights.h"

namespace lathe {

KvCacheDtype parse_kv_cache_dtype(std::string_view s) {
  for (int i = 0; i < static_cast<int>(KvCacheDtype::kCount); ++i)
    if (s == kv_cache_dtype_name(static_cast<KvCacheDtype>(i))) return static_cast<KvCacheDtype>(i);
  throw InvalidArgument(str_cat("[kv_cache_dtype] '", s, "' is not one of auto, f32, bf16, int8"));
}

std::string_view kv_cache_dtype_name(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kAuto: return "auto";
    case KvCacheDtype::kF32: return "f32";
    case KvCacheDtype::kBF16: return "bf16";
    case KvCacheDtype::kInt8: return "int8";
    case KvCacheDtype::kCount: break;
  }
  return "?";
}

DType resolve_kv_cache_dtype(KvCacheDtype d, const Model& model) {
  if (d == KvCacheDtype::kF32) return DType::kF32;
  if (d == KvCacheDtype::kBF16) return DType::kBF16;
  if (d == KvCacheDtype::kInt8) return DType::kI8;
  // A quantised Linear (int8 / int4 / int6 / NF4 codes): the weights already round far coarser than a bf16
  // cache does, and at long contexts decode reads as many cache bytes as weight bytes (llama.cpp keeps its
  // cache in f16 whatever the weights).
  bool quantised = false;
  for_each_linear_module(model.weights(), [&](const Linear& l) { quantised = quantised || l.quant.defined(); });
  if (quantised) return DType::kBF16;
  bool any = false, all_bf16 = true;
  model.for_each_param([&](const std::string&, const Tensor& t, ParamRole, int) {
    if (t.dim() != 2) return;
    any = true;
    all_bf16 = all_bf16 && t.dtype() == DType::kBF16;
  });
  return any && all_bf16 ? DType::kBF16 : DType::kF32;
}

std::string_view kv_store_dtype_name(DType kv_dtype) {
  return kv_dtype == DType::kI8 ? kv_cache_dtype_name(KvCacheDtype::kInt8) : dtype_name(kv_dtype);
}

}  // namespace lathe
