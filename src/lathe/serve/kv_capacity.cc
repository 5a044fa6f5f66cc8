// KV pool sizing: bytes per block, blocks per budget, the summary line.
#include "lathe/serve/kv_capacity.h"

#include <cstdio>

#include "lathe/base/error.h"
#include "lathe/models/kv_cache_dtype.h"
#include "lathe/models/paged_kv_store.h"

namespace lathe {

int64_t kv_block_bytes(const KvLayout& l, int block_size, DType kv_dtype) {
  LATHE_CHECK_ARG(l.n_layers >= 1 && l.n_kv_heads >= 1 && l.head_dim >= 1 && block_size >= 1,
                  "[kv_block_bytes] needs n_layers, n_kv_heads, head_dim and block_size >= 1, got L ", l.n_layers,
                  " Hkv ", l.n_kv_heads, " D ", l.head_dim, " P ", block_size);
  return 2 * static_cast<int64_t>(l.n_layers) * l.n_kv_heads * block_size * kv_slot_bytes(l.head_dim, kv_dtype);
}

int64_t kv_blocks_for_bytes(int64_t bytes, const KvLayout& layout, int block_size, DType kv_dtype) {
  const int64_t per_block = kv_block_bytes(layout, block_size, kv_dtype);
  LATHE_CHECK_ARG(bytes / per_block >= 2, "[kv_cache_memory] ", bytes, " bytes hold ", bytes / per_block,
                  " KV blocks of ", per_block, " bytes (", block_size, " tokens each, ", kv_store_dtype_name(kv_dtype),
                  "); at least 2 are needed (the null block and one usable block), i.e. ",
                  2 * per_block, " bytes");
  return bytes / per_block;
}

std::string kv_capacity_summary(int64_t n_blocks, int block_size, const KvLayout& layout, DType kv_dtype) {
  const double mib =
      static_cast<double>(n_blocks * kv_block_bytes(layout, block_size, kv_dtype)) / (1024.0 * 1024.0);
  char buf[160];
  std::snprintf(buf, sizeof buf, "KV cache (%s): %lld blocks of %d tokens = %lld tokens (%.1f MiB)",
                std::string(kv_store_dtype_name(kv_dtype)).c_str(), static_cast<long long>(n_blocks - 1), block_size,
                static_cast<long long>((n_blocks - 1) * block_size), mib);
  return buf;
}

}  // namespace lathe
