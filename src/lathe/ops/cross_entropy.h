// Token cross-entropy losses: the plain form on materialised logits, and the fused head-matmul form that
// never holds the [N, V] logits (for V ~ 150K the logits would outweigh the whole model's activations).
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// mean over rows i with labels[i] != ignore_index of (logsumexp(logits[i]) − logits[i, labels[i]]).
// logits [N, V] f32; labels [N] i32, each in [0, V) or == ignore_index (else InvalidArgument) ->
// loss [] (0-dim). All rows ignored -> NaN, as torch. Gradient for logits: (softmax − onehot)·g/count,
// recomputed row by row in backward from the saved logits and per-row lse [N] (no [N, V] kept).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int ignore_index = -100);

struct LinearCrossEntropyOptions {
  int ignore_index = -100;
  float final_softcap = 0.f;  // > 0: z = cap·tanh(logits / cap) before the softmax (Gemma 2); 0: off
  int64_t chunk_size = 4096;  // vocabulary rows per chunk: extra memory is [N, chunk_size] f32
  // The forward's chunk logits are kept for the backward (saving one head GEMM, ~1/3 of the head's
  // cost) when all of them fit in this many bytes; above it they are recomputed chunk by chunk, so the
  // extra memory stays [N, chunk_size]. 0: always recompute. Probabilities are never stored.
  int64_t keep_logits_bytes = int64_t{256} << 20;
};

// cross_entropy(linear(hidden, weight), labels) fused: the vocabulary is walked in chunks with an online
// log-sum-exp, so peak extra memory is one [N, chunk] block. hidden [N, C] f32; weight [V, C] f32 (or
// bf16: no weight gradient unless it is a bf16_compute_weight copy; hidden may then be bf16 too, for bf16
// compute; or f16, a 16-bit checkpoint's head: no weight gradient); labels [N] i32 -> loss []. Backward recomputes each chunk's logits and accumulates dhidden
// [N, C] and dweight [V, C] (f32) chunk by chunk.
Tensor linear_cross_entropy(const Tensor& hidden, const Tensor& weight, const Tensor& labels,
                            const LinearCrossEntropyOptions& options = {});

}  // namespace lathe
