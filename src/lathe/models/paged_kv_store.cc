// PagedKvStore: the block pool and free lists, sequence allocation, batch checks, and the K/V write plus
// paged_attention call of each layer.
#include "lathe/models/paged_kv_store.h"

#include <algorithm>

#include "lathe/base/context.h"
#include "lathe/ops/paged_attention.h"

namespace lathe {

PagedKvStoreConfig paged_kv_store_config(const ModelConfig& c, int64_t n_blocks, int block_size, DType kv_dtype) {
  return {.n_layers = static_cast<int>(c.n_layers), .n_heads = static_cast<int>(c.n_heads),
          .n_kv_heads = static_cast<int>(c.n_kv_heads), .head_dim = static_cast<int>(c.head_dim),
          .n_blocks = n_blocks, .block_size = block_size, .kv_dtype = kv_dtype};
}

int64_t kv_slot_bytes(int64_t head_dim, DType kv_dtype) {
  const int64_t scale = kv_dtype == DType::kI8 ? static_cast<int64_t>(sizeof(float)) : 0;
  return head_dim * static_cast<int64_t>(dtype_size(kv_dtype)) + scale;
}

PagedKvStore::PagedKvStore(const PagedKvStoreConfig& config) : config_(config) {
  const PagedKvStoreConfig& c = config_;
  LATHE_CHECK_ARG(c.n_layers >= 1 && c.n_heads >= 1 && c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0 && c.head_dim >= 1 && c.block_size >= 1 && c.n_blocks >= 1 &&
                      c.n_blocks <= INT32_MAX && c.n_threads >= 0,
                  "[PagedKvStore] needs n_layers, n_heads, n_kv_heads, head_dim, block_size, n_blocks >= 1 "
                  "(n_blocks < 2^31), n_heads a multiple of n_kv_heads and n_threads >= 0, got L ",
                  c.n_layers, " H ", c.n_heads, " Hkv ", c.n_kv_heads, " D ", c.head_dim, " P ", c.block_size, " n_blocks ", c.n_blocks,
                  " n_threads ", c.n_threads);
  LATHE_CHECK_ARG(c.kv_dtype == DType::kF32 || c.kv_dtype == DType::kBF16 || c.kv_dtype == DType::kI8,
                  "[PagedKvStore] kv_dtype must be f32, bf16 or i8 (int8), got ", dtype_name(c.kv_dtype));
  for (int l = 0; l < c.n_layers; ++l) {
    k_.push_back(Tensor::zeros({c.n_blocks, c.n_kv_heads, c.block_size, c.head_dim}, c.kv_dtype));
    v_.push_back(Tensor::zeros({c.n_blocks, c.n_kv_heads, c.block_size, c.head_dim}, c.kv_dtype));
    if (c.kv_dtype == DType::kI8) {
      k_scales_.push_back(Tensor::zeros({c.n_blocks, c.n_kv_heads, c.block_size}));
      v_scales_.push_back(Tensor::zeros({c.n_blocks, c.n_kv_heads, c.block_size}));
    } else {
      k_scales_.emplace_back();
      v_scales_.emplace_back();
    }
  }
  // Popped from the back: block 0 first, so a fresh store hands out blocks in order.
  for (int64_t b = c.n_blocks - 1; b >= 0; --b) free_blocks_.push_back(static_cast<int32_t>(b));
  n_workers_ = c.n_threads > 0 ? c.n_threads : current_context().pool.n_threads();
  scratch_.resize(static_cast<size_t>(n_workers_) *
                  paged_attention_scratch_floats(c.n_heads, c.n_kv_heads, c.head_dim, c.block_size, c.kv_dtype));
  // One entry per sequence of a batch, plus one: room for as many sequences as the pool can hold apart.
  task_starts_.resize(static_cast<size_t>(std::max<int64_t>(64, config_.n_blocks)) + 1);
}

KvSequence PagedKvStore::allocate(int64_t max_tokens) {
  LATHE_CHECK_ARG(max_tokens >= 1, "[PagedKvStore::allocate] max_tokens must be >= 1, got ", max_tokens);
  const int64_t n = kv_blocks_for(max_tokens, config_.block_size);
  if (n > static_cast<int64_t>(free_blocks_.size()))
    throw KvStoreFull(str_cat("[PagedKvStore::allocate] ", max_tokens, " tokens need ", n, " blocks of ",
                              config_.block_size, "; ", free_blocks_.size(), " of ", config_.n_blocks, " are free"));
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(tables_.size());
    tables_.emplace_back();
  }
  std::vector<int32_t>& table = tables_[id];
  table.assign(free_blocks_.end() - n, free_blocks_.end());
  std::reverse(table.begin(), table.end());
  free_blocks_.resize(free_blocks_.size() - n);
  return KvSequence{id};
}

void PagedKvStore::check_sequence(KvSequence seq) const {
  LATHE_CHECK_ARG(seq.id >= 0 && seq.id < static_cast<int32_t>(tables_.size()) && !tables_[seq.id].empty(),
                  "[PagedKvStore] sequence ", seq.id, " is not allocated");
}

void PagedKvStore::free(KvSequence seq) {
  check_sequence(seq);
  std::vector<int32_t>& table = tables_[seq.id];
  free_blocks_.insert(free_blocks_.end(), table.rbegin(), table.rend());
  table.clear();
  free_ids_.push_back(seq.id);
}

std::span<const int32_t> PagedKvStore::block_table(KvSequence seq) const {
  check_sequence(seq);
  return tables_[seq.id];
}

void PagedKvStore::attention(int layer, const ForwardBatch& batch, const float* q, const float* k, const float* v,
                             float* out, const AttentionOptions& opt) {
  const PagedKvStoreConfig& c = config_;
  LATHE_CHECK_ARG(layer >= 0 && layer < c.n_layers, "[PagedKvStore::attention] layer ", layer, " of ", c.n_layers);
  LATHE_CHECK_ARG(opt.causal && opt.q_offset == 0 && !opt.key_start.defined() && opt.window >= 0 &&
                      opt.softcap >= 0.f,
                  "[PagedKvStore::attention] needs causal options without q_offset or key_start (positions say "
                  "where each row is), window and softcap >= 0");
  LATHE_CHECK_ARG(!batch.seq_starts.empty() && batch.seq_starts[0] == 0,
                  "[PagedKvStore::attention] seq_starts must start at 0 ([S + 1] offsets)");
  const int64_t S = static_cast<int64_t>(batch.seq_starts.size()) - 1, N = batch.seq_starts.back();
  LATHE_CHECK_ARG(static_cast<int64_t>(batch.block_tables.size()) == S &&
                      static_cast<int64_t>(batch.context_lens.size()) == S,
                  "[PagedKvStore::attention] ", S, " sequences but ", batch.block_tables.size(), " block tables and ",
                  batch.context_lens.size(), " context lengths");
  LATHE_CHECK_ARG(batch.positions.defined() && batch.positions.dtype() == DType::kI32 &&
                      batch.positions.numel() == N && batch.positions.is_contiguous(),
                  "[PagedKvStore::attention] positions must be contiguous int32 [N] = [", N, "]");
  if (N == 0) return;
  LATHE_CHECK_ARG(q && k && v && out, "[PagedKvStore::attention] null q, k, v or out");
  const int32_t* pos = batch.positions.data<int32_t>();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t lo = batch.seq_starts[s], hi = batch.seq_starts[s + 1], ctx = batch.context_lens[s];
    LATHE_CHECK_ARG(lo <= hi, "[PagedKvStore::attention] seq_starts must be non-decreasing");
    if (lo == hi) continue;
    const std::span<const int32_t> table = batch.block_tables[s];
    LATHE_CHECK_ARG(ctx >= 1 && kv_blocks_for(ctx, c.block_size) <= static_cast<int64_t>(table.size()),
                    "[PagedKvStore::attention] sequence ", s, ": context ", ctx, " needs ",
                    kv_blocks_for(ctx, c.block_size), " blocks, its table has ", table.size());
    for (int64_t b = 0; b < kv_blocks_for(ctx, c.block_size); ++b)
      LATHE_CHECK_ARG(table[b] >= 0 && table[b] < c.n_blocks, "[PagedKvStore::attention] sequence ", s, " block ", b,
                      " is ", table[b], ", the pool has ", c.n_blocks);
    for (int64_t i = lo; i < hi; ++i)
      LATHE_CHECK_ARG(pos[i] >= 0 && pos[i] < ctx, "[PagedKvStore::attention] row ", i, " of sequence ", s,
                      " is at position ", pos[i], ", outside its context [0, ", ctx, ")");
  }
  if (static_cast<int64_t>(task_starts_.size()) < S + 1) task_starts_.resize(S + 1);
  const bool scaled = c.kv_dtype == DType::kI8;
  float* k_scales = scaled ? k_scales_[layer].data<float>() : nullptr;
  float* v_scales = scaled ? v_scales_[layer].data<float>() : nullptr;
  PagedAttentionArgs a{.q = q, .out = out, .k_pool = k_[layer].raw_data(), .v_pool = v_[layer].raw_data(),
                       .kv_dtype = c.kv_dtype, .k_scales = k_scales, .v_scales = v_scales, .positions = pos,
                       .seq_starts = batch.seq_starts.data(), .block_tables = batch.block_tables.data(),
                       .context_lens = batch.context_lens.data(), .n_seqs = S, .n_heads = c.n_heads,
                       .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim, .block_size = c.block_size,
                       .task_starts = task_starts_.data(), .scratch = scratch_.data(), .n_scratch_workers = n_workers_};
  paged_kv_write(a, k, v,
                 {.k_pool = k_[layer].raw_data(), .v_pool = v_[layer].raw_data(), .k_scales = k_scales,
                  .v_scales = v_scales});
  paged_attention(a, opt, current_context().pool);
}

}  // namespace lathe
