// The KV cache's element type as a run asks for it (`--kv-cache-dtype auto|f32|bf16`, as vLLM's
// `--kv-cache-dtype`), and the dtype a PagedKvStore then holds: auto follows the model's weights.
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/models/model.h"
#include "lathe/tensor/dtype.h"

namespace lathe {

enum class KvCacheDtype : uint8_t { kAuto, kF32, kBF16, kCount };

// "auto", "f32" or "bf16"; InvalidArgument naming the choices otherwise.
KvCacheDtype parse_kv_cache_dtype(std::string_view s);
std::string_view kv_cache_dtype_name(KvCacheDtype d);

// The store's dtype, kF32 or kBF16. kAuto: bf16 when the model holds its matrices (every 2-D weight) in
// bf16, as a bf16 checkpoint loaded for inference does; f32 otherwise (f32 or f16 weights, force_f32, MoE).
DType resolve_kv_cache_dtype(KvCacheDtype d, const Model& model);

}  // namespace lathe
