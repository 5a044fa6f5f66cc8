// A flat batch of token rows from one or more sequences: what one forward call runs over. Training's
// [B, T] is B equal-length sequences at positions 0..T-1; packed documents are more, shorter sequences;
// serving mixes prefill chunks and single decode rows of many sequences over a KV store.
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
  // Packed documents in rows of this many tokens (training with document masking): no sequence crosses
  // a multiple of row_length, so attention runs over [N / row_length, row_length] rows as for equal rows,
  // each key range starting at its sequence (0: not packed in rows).
  int64_t row_length = 0;
  // Served LoRA adapters (multi-LoRA serving): per sequence, the Linear slot of its adapter (0: the base;
  // Linear::lora_slots). Empty: every sequence runs the base (no served adapter, no cost). Inference only.
  std::vector<int32_t> lora_slots;  // [S] or empty

  int64_t n_rows() const { return tokens.defined() ? tokens.numel() : 0; }              // N
  int64_t n_seqs() const { return static_cast<int64_t>(seq_starts.size()) - 1; }        // S
  int64_t n_outputs() const { return output_rows.defined() ? output_rows.numel() : n_rows(); }  // M
  // B when the batch is B sequences of one length T, all at positions 0..T-1 with no store (the case the
  // [B, T] attention runs); 0 otherwise.
  int64_t equal_rows() const;

  // Builders. ids int32 [B, T]: B sequences of T tokens at positions 0..T-1 (training).
  static ForwardBatch rows(const Tensor& ids);
  // Packed documents, tokens and positions int32 [N]: a sequence starts at every row whose position is
  // not the previous row's + 1 (positions restart at 0 per document); each attends only within itself.
  // row_length > 0: the documents lie in rows of that many tokens (each row starts a sequence).
  static ForwardBatch packed(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                             int64_t row_length = 0);
};

// One sequence's part of a batch over a KV store: `tokens` at positions start, start + 1, ... (a prefill
// chunk, or one decode token), after `start` positions already cached in the blocks of `block_table`.
struct SequenceChunk {
  std::span<const int32_t> tokens;
  int64_t start = 0;
  std::span<const int32_t> block_table;
  bool want_last = true;  // the chunk's last row is an output row (its logits are sampled)
  bool want_all = false;  // every row of the chunk is an output row
  int32_t lora_slot = 0;  // the served adapter it runs with (ForwardBatch::lora_slots; 0: the base)
};

// The chunks in order, one sequence each (rows concatenated), over `kv`.
ForwardBatch cached_batch(KvStore& kv, std::span<const SequenceChunk> chunks);

// Throws InvalidArgument naming the first inconsistency: offsets that do not cover [0, N) in order,
// empty sequences, tensors of the wrong dtype or shape, store fields of the wrong length, a context
// length below a row's position + 1, output rows outside [0, N), lora_slots of the wrong length or negative.
void check_forward_batch(const ForwardBatch& batch);

}  // namespace lathe
