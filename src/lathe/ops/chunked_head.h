// The LM head walked over vocabulary chunks, shared by linear_cross_entropy and linear_token_logprobs:
// logits [N, vc] = hidden · weight[v0 : v0 + vc]ᵀ (soft-capped) one chunk at a time, so the [N, V]
// logits exist only when explicitly kept for the backward (ChunkedHeadOptions::keep_logits_bytes).
#pragma once

#include <cstdint>
#include <functional>

#include "lathe/tensor/tensor.h"

namespace lathe {

struct ChunkedHeadOptions {
  float final_softcap = 0.f;  // > 0: z = cap·tanh(logits / cap) (Gemma 2); 0: off
  int64_t chunk_size = 4096;  // vocabulary rows per chunk: extra memory is [N, chunk_size] f32
  int64_t keep_logits_bytes = int64_t{256} << 20;  // keep all chunk logits for the backward up to this size
};

// A head's validated, contiguous inputs and its chunking.
struct ChunkedHead {
  Tensor hidden;  // [N, C] f32, or bf16 with a bf16 weight (bf16 compute)
  Tensor weight;  // [V, C] f32, bf16, or f16 (a 16-bit checkpoint's head; with an f32 hidden)
  int64_t n = 0, c = 0, v = 0;
  int64_t chunk = 1;  // vocabulary rows per chunk, <= max(V, 1)
  float cap = 0.f;    // final soft-cap; 0: off
  Tensor kept;        // [N·V] f32, the chunk at v0 from offset N·v0: the forward's logits kept for the backward; undefined: recomputed
};

// Validates hidden, weight and options (InvalidArgument prefixed with "[op]"). The logits are kept when
// `for_backward` and N·V f32 fit in options.keep_logits_bytes (saves one head GEMM in the backward).
ChunkedHead make_chunked_head(const char* op, const Tensor& hidden, const Tensor& weight,
                              const ChunkedHeadOptions& options, bool for_backward);

// A 16-bit weight gets a gradient only as the compute copy of an f32 master (bf16_compute_weight).
void check_chunked_head_weight_grad(const char* op, const Tensor& weight_in);

// Row i's logits z [vc] of the chunk that starts at vocabulary row v0. Rows of one chunk run in
// parallel on the context's pool; chunks run in order (v0 ascending).
using ChunkRowFn = std::function<void(int64_t i, int64_t v0, int64_t vc, float* z)>;

// Computes each chunk's (soft-capped) logits and hands every row to fn, read only.
void chunked_head_forward(const ChunkedHead& head, const ChunkRowFn& fn);

// Backward: fn overwrites each row's chunk logits z with d(loss)/d(pre-cap logits) (the cap's derivative
// 1 − (z/cap)² is the row rule's job, fused with it); then dh = Σ_chunks da · w_chunk and dw_chunk =
// daᵀ · hidden. dh [N, C] and dw [V, C] f32 are allocated here when wanted (want_h / want_w), else left
// undefined. Uses (and consumes) the kept logits when there are some.
void chunked_head_backward(const ChunkedHead& head, const ChunkRowFn& fn, bool want_h, bool want_w, Tensor* dh,
                           Tensor* dw);

}  // namespace lathe
