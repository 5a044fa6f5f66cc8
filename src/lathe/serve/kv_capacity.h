// Sizing the KV pool from a byte budget (`--kv-cache-memory`), and the start-up line that reports it.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/models/kv_store.h"
#include "lathe/tensor/dtype.h"

namespace lathe {

// Bytes one block of a PagedKvStore takes: K and V, of kv_dtype (f32: 4 bytes, bf16: 2, int8 (kI8): 1 plus
// an f32 scale per slot of D), of L layers, Hkv heads, P positions, D dims.
int64_t kv_block_bytes(const KvLayout& layout, int block_size, DType kv_dtype);

// The most blocks `bytes` hold (the null block among them). InvalidArgument, naming both sizes, when
// the budget holds fewer than 2 (the null block and one usable block).
int64_t kv_blocks_for_bytes(int64_t bytes, const KvLayout& layout, int block_size, DType kv_dtype);

// "KV cache (bf16): 1023 blocks of 16 tokens = 16368 tokens (64.0 MiB)": the dtype, the usable blocks
// (the null block excluded) and the memory of all n_blocks.
std::string kv_capacity_summary(int64_t n_blocks, int block_size, const KvLayout& layout, DType kv_dtype);

}  // namespace lathe
