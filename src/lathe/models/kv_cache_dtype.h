// The KV cache's element type as a run asks for it (`--kv-cache-dtype auto|f32|bf16|int8`, as vLLM's
// `--kv-cache-dtype`), and the dtype a PagedKvStore then holds: auto follows the model's weights. int8 is
// a store of kI8 codes with one f32 scale per (token, KV head) for K and one for V (paged_kv_store.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/models/model.h"
#include "lathe/tensor/dtype.h"

namespace lathe {

enum class KvCacheDtype : uint8_t { kAuto, kF32, kBF16, kInt8, kCount };

// "auto", "f32", "bf16" or "int8"; InvalidArgument naming the choices otherwise.
KvCacheDtype parse_kv_cache_dtype(std::string_view s);
std::string_view kv_cache_dtype_name(KvCacheDtype d);

// The store's dtype, kF32, kBF16 or kI8 (int8). kAuto: bf16 when the model holds its matrices (every 2-D
// weight) in bf16, as a bf16 checkpoint loaded for inference does, or when any Linear is quantised (a
// `lathe quantize` folder, a Q8_0 / Q4_0 GGUF, an NF4 base); f32 otherwise (f32 or f16 weights, force_f32,
// MoE). Never int8: quantising the cache is asked for, not inferred.
DType resolve_kv_cache_dtype(KvCacheDtype d, const Model& model);

// The name of a store's dtype as the start-up line and errors print it: "f32", "bf16", "int8".
std::string_view kv_store_dtype_name(DType kv_dtype);

}  // namespace lathe
