// A flat batch of token rows from one or more sequences: what one forward call runs over.
// (Placeholder copy of the contract's ForwardBatch for the KV store branch; the forward's own header,
// with the builders, replaces it at merge.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/tensor/tensor.h"

namespace lathe {

class KvStore;

struct ForwardBatch {
  Tensor tokens;                    // int32 [N]
  Tensor positions;                 // int32 [N]: each row's position in its sequence
  std::vector<int64_t> seq_starts;  // [S + 1] (cu_seqlens): sequence s owns rows [seq_starts[s], seq_starts[s+1])
  // With a KV store (serving, generation): per sequence, its block table and KV length after this call.
  KvStore* kv = nullptr;                                // null: training / no cache
  std::vector<std::span<const int32_t>> block_tables;  // [S]
  std::vector<int64_t> context_lens;                   // [S] cached + new
  Tensor output_rows;  // int32 [M]: rows whose outputs (logits, hidden) are wanted; undefined = all N
};

}  // namespace lathe
