// Attention of ragged token rows against a paged KV pool, read in place (no gather copy), and the write
// of the rows' own keys and values into their slots. Forward only: serving and generation, no autograd.
//
// Pool layout, per layer: K and V [n_blocks, Hkv, P, D] f32, bf16 or int8 (one KV head's keys of a block are
// contiguous: read with a stride of Hkv·D, 4 KiB at Hkv·D = 1024, all keys of a block fell in one L1 set). Sequence s's KV position p lives in block
// block_tables[s][p / P], slot p % P. Sequence s owns query rows [seq_starts[s], seq_starts[s + 1]);
// row i (position positions[i]) sees the keys j < context_lens[s] with j <= positions[i] and, with a
// window W, positions[i] − j < W. Rows are tiled per (sequence, KV head): the H / Hkv query heads of
// one KV head and up to a few rows share a tile, which walks the visible blocks once with an online
// softmax (blocks wholly outside every row's window are not read). A bf16 pool is widened to f32 as it is
// loaded (whole vectors), so it computes exactly what an f32 pool holding the same bf16 values would.
//
// An int8 pool (kv_dtype kI8) holds codes c [n_blocks, Hkv, P, D] int8 and, per slot, one f32 scale s
// [n_blocks, Hkv, P] for K and one for V: the stored vector is s·c, with s = absmax / 127 of the D values
// written and c = round(x · (1 / s)) (half away from zero, as llama.cpp's Q8_0 and ref/quant.h). The codes are
// widened to f32 in registers; a score is s_k · (q·c_k) and the P·V sum takes p·s_v times c_v, so the
// scales cost one multiply per key, not per element. The scales sit beside the codes, indexed by the same
// block id: a block shared by prefix caching is shared with its scales.
#pragma once

#include <cstdint>
#include <span>

#include "lathe/base/thread_pool.h"
#include "lathe/ops/attention.h"
#include "lathe/tensor/dtype.h"

namespace lathe {

struct PagedAttentionArgs {
  const float* q = nullptr;  // [N, H, D], rotated
  float* out = nullptr;      // [N, H, D]
  const void* k_pool = nullptr;  // [n_blocks, Hkv, P, D] of kv_dtype
  const void* v_pool = nullptr;  // [n_blocks, Hkv, P, D] of kv_dtype
  DType kv_dtype = DType::kF32;  // the pools' elements: kF32, kBF16 or kI8 (codes, with the scales below)
  const float* k_scales = nullptr;  // [n_blocks, Hkv, P], kI8 only: the scale of each key slot
  const float* v_scales = nullptr;  // [n_blocks, Hkv, P], kI8 only: the scale of each value slot
  const int32_t* positions = nullptr;                 // [N]
  const int64_t* seq_starts = nullptr;                // [S + 1]
  const std::span<const int32_t>* block_tables = nullptr;  // [S], each >= ceil(context_lens[s] / P) blocks
  const int64_t* context_lens = nullptr;              // [S]
  int64_t n_seqs = 0;                                 // S
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;  // H, Hkv, D, P
  // Workspace: task_starts [S + 1] int64, and per worker paged_attention_scratch_floats() floats.
  int64_t* task_starts = nullptr;
  float* scratch = nullptr;
  int n_scratch_workers = 0;  // at most this many workers run (one scratch each)
};

// Floats of scratch one worker needs for these dims and pool dtype.
int64_t paged_attention_scratch_floats(int n_heads, int n_kv_heads, int head_dim, int block_size, DType kv_dtype);

// Where paged_kv_write stores: the pools of args.kv_dtype and, for kI8, the scale pools.
struct PagedKvDest {
  void* k_pool = nullptr;     // [n_blocks, Hkv, P, D]
  void* v_pool = nullptr;     // [n_blocks, Hkv, P, D]
  float* k_scales = nullptr;  // [n_blocks, Hkv, P], kI8 only
  float* v_scales = nullptr;  // [n_blocks, Hkv, P], kI8 only
};

// Writes k and v [N, Hkv, D] of every row into its slot (from its position and its sequence's block
// table), in args.kv_dtype (bf16: rounded to nearest even; int8: quantised per (row, KV head) as above).
// Arguments as in PagedAttentionArgs; validated by the caller (the KV store).
void paged_kv_write(const PagedAttentionArgs& args, const float* k, const float* v, const PagedKvDest& dest);

// out = attention of every row as described above. opt.scale (0: 1/sqrt(D)), opt.window and
// opt.softcap apply as in scaled_dot_product_attention; causality comes from the positions. The arguments
// are validated by the caller (the KV store); no allocation; parallel over the pool's workers.
void paged_attention(const PagedAttentionArgs& args, const AttentionOptions& opt, const ThreadPool& pool);

}  // namespace lathe
