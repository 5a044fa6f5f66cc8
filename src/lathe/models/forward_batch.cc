// ForwardBatch builders and the checks every forward runs on its batch.
#include "lathe/models/forward_batch.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe {

int64_t ForwardBatch::equal_rows() const {
  if (kv || n_seqs() < 1) return 0;
  const int64_t T = seq_starts[1] - seq_starts[0];
  if (T < 1 || n_rows() != T * n_seqs()) return 0;
  const int32_t* p = positions.data<int32_t>();
  for (int64_t s = 0; s < n_seqs(); ++s) {
    if (seq_starts[s] != s * T) return 0;
    for (int64_t t = 0; t < T; ++t)
      if (p[s * T + t] != t) return 0;
  }
  return n_seqs();
}

ForwardBatch ForwardBatch::rows(const Tensor& ids) {
  LATHE_CHECK_ARG(ids.dim() == 2 && ids.dtype() == DType::kI32 && ids.size(1) >= 1,
                  "[ForwardBatch::rows] ids must be int32 [B, T] with T >= 1, got ", dtype_name(ids.dtype()), " ",
                  shape_str(ids.shape()));
  const int64_t B = ids.size(0), T = ids.size(1);
  ForwardBatch b;
  b.tokens = ids.contiguous().view({B * T});
  b.positions = Tensor::empty({B * T}, DType::kI32);
  int32_t* p = b.positions.data<int32_t>();
  for (int64_t i = 0; i < B * T; ++i) p[i] = static_cast<int32_t>(i % T);
  for (int64_t s = 0; s <= B; ++s) b.seq_starts.push_back(s * T);
  return b;
}

ForwardBatch ForwardBatch::packed(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                                  int64_t row_length) {
  LATHE_CHECK_ARG(tokens.size() == positions.size() && !tokens.empty(),
                  "[ForwardBatch::packed] tokens and positions must have one equal, non-zero length, got ",
                  tokens.size(), " and ", positions.size());
  const int64_t N = static_cast<int64_t>(tokens.size());
  ForwardBatch b;
  b.tokens = Tensor::from_data_i32({N}, std::vector<int32_t>(tokens.begin(), tokens.end()));
  b.positions = Tensor::from_data_i32({N}, std::vector<int32_t>(positions.begin(), positions.end()));
  for (int64_t i = 0; i < N; ++i)
    if (i == 0 || positions[i] != positions[i - 1] + 1 || (row_length > 0 && i % row_length == 0))
      b.seq_starts.push_back(i);
  b.seq_starts.push_back(N);
  b.row_length = row_length;
  return b;
}

ForwardBatch cached_batch(KvStore& kv, std::span<const SequenceChunk> chunks) {
  ForwardBatch b;
  b.kv = &kv;
  std::vector<int32_t> tokens, positions, outputs;
  b.seq_starts.push_back(0);
  for (const SequenceChunk& c : chunks) {
    LATHE_CHECK_ARG(!c.tokens.empty() && c.start >= 0, "[cached_batch] a chunk needs >= 1 token and start >= 0");
    const int64_t row0 = static_cast<int64_t>(tokens.size());
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      tokens.push_back(c.tokens[i]);
      positions.push_back(static_cast<int32_t>(c.start + static_cast<int64_t>(i)));
      if (c.want_all || (c.want_last && i + 1 == c.tokens.size()))
        outputs.push_back(static_cast<int32_t>(row0 + static_cast<int64_t>(i)));
    }
    b.seq_starts.push_back(static_cast<int64_t>(tokens.size()));
    b.block_tables.push_back(c.block_table);
    b.context_lens.push_back(c.start + static_cast<int64_t>(c.tokens.size()));
  }
  // Slots only when some chunk has an adapter: a base-only batch stays exactly what it was.
  if (std::any_of(chunks.begin(), chunks.end(), [](const SequenceChunk& c) { return c.lora_slot != 0; }))
    for (const SequenceChunk& c : chunks) b.lora_slots.push_back(c.lora_slot);
  const int64_t N = static_cast<int64_t>(tokens.size()), M = static_cast<int64_t>(outputs.size());
  b.tokens = Tensor::from_data_i32({N}, tokens);
  b.positions = Tensor::from_data_i32({N}, positions);
  b.output_rows = Tensor::from_data_i32({M}, outputs);
  return b;
}

void check_forward_batch(const ForwardBatch& b) {
  const char* w = "[forward]";
  LATHE_CHECK_ARG(b.tokens.defined() && b.tokens.dim() == 1 && b.tokens.dtype() == DType::kI32 && b.n_rows() >= 1,
                  w, " tokens must be int32 [N] with N >= 1");
  const int64_t N = b.n_rows();
  LATHE_CHECK_ARG(b.positions.defined() && b.positions.shape() == b.tokens.shape() &&
                      b.positions.dtype() == DType::kI32 && b.positions.is_contiguous(),
                  w, " positions must be contiguous int32 [", N, "] like the tokens");
  LATHE_CHECK_ARG(b.seq_starts.size() >= 2 && b.seq_starts.front() == 0 && b.seq_starts.back() == N, w,
                  " seq_starts must run from 0 to N = ", N, " (one entry per sequence, plus one)");
  const int32_t* pos = b.positions.data<int32_t>();
  for (int64_t s = 0; s < b.n_seqs(); ++s) {
    LATHE_CHECK_ARG(b.seq_starts[s] < b.seq_starts[s + 1], w, " sequence ", s, " has no rows (seq_starts must increase)");
    for (int64_t i = b.seq_starts[s]; i < b.seq_starts[s + 1]; ++i) {
      LATHE_CHECK_ARG(pos[i] >= 0, w, " row ", i, " has negative position ", pos[i]);
      // A sequence's rows are its next positions, one after the other (over a store: after its cached ones).
      LATHE_CHECK_ARG(i == b.seq_starts[s] || pos[i] == pos[i - 1] + 1, w, " row ", i, " of sequence ", s,
                      " is at position ", pos[i], " after ", pos[i - 1], " (rows of a sequence must be consecutive)");
    }
  }
  if (b.kv) {
    LATHE_CHECK_ARG(static_cast<int64_t>(b.block_tables.size()) == b.n_seqs() &&
                        static_cast<int64_t>(b.context_lens.size()) == b.n_seqs(),
                    w, " with a KV store every sequence needs a block table and a context length");
    // The context ends with the call's last row: keys beyond it would be slots no call has written.
    for (int64_t s = 0; s < b.n_seqs(); ++s)
      LATHE_CHECK_ARG(b.context_lens[s] == pos[b.seq_starts[s + 1] - 1] + 1, w, " sequence ", s, " has context length ",
                      b.context_lens[s], " but its last row is at position ", pos[b.seq_starts[s + 1] - 1],
                      " (the context is the cached positions plus this call's rows)");
  }
  if (b.row_length > 0) {
    LATHE_CHECK_ARG(!b.kv && N % b.row_length == 0, w, " row_length ", b.row_length,
                    " needs N (", N, ") to be a multiple of it and no KV store");
    size_t s = 0;  // every row start must be a sequence start
    for (int64_t r = 0; r < N; r += b.row_length) {
      while (s < b.seq_starts.size() && b.seq_starts[s] < r) ++s;
      LATHE_CHECK_ARG(s < b.seq_starts.size() && b.seq_starts[s] == r, w, " a sequence crosses row ", r / b.row_length,
                      " of ", b.row_length, " tokens (row_length)");
    }
  }
  if (!b.lora_slots.empty()) {
    LATHE_CHECK_ARG(static_cast<int64_t>(b.lora_slots.size()) == b.n_seqs(), w, " lora_slots has ",
                    b.lora_slots.size(), " entries for ", b.n_seqs(), " sequences");
    for (size_t s = 0; s < b.lora_slots.size(); ++s)
      LATHE_CHECK_ARG(b.lora_slots[s] >= 0, w, " sequence ", s, " has LoRA slot ", b.lora_slots[s], " (must be >= 0)");
  }
  if (b.output_rows.defined()) {
    LATHE_CHECK_ARG(b.output_rows.dim() == 1 && b.output_rows.dtype() == DType::kI32 && b.output_rows.is_contiguous(),
                    w, " output_rows must be contiguous int32 [M]");
    const int32_t* o = b.output_rows.data<int32_t>();
    for (int64_t i = 0; i < b.output_rows.numel(); ++i)
      LATHE_CHECK_ARG(o[i] >= 0 && o[i] < N, w, " output row ", o[i], " is outside [0, ", N, ")");
  }
}

}  // namespace lathe
