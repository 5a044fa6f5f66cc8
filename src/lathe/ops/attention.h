// Scaled dot-product attention over contiguous q, k, v (training, differentiable; decoding over the paged
// KV store is ops/paged_attention.h). Masks follow transformers: causal, optional sliding window, optional
// Gemma-2 softcap.
#pragma once

#include <cstdint>

#include "lathe/base/thread_pool.h"
#include "lathe/tensor/tensor.h"

namespace lathe {

struct AttentionOptions {
  float scale = 0.f;  // applied to q·k; 0 means 1/sqrt(D) (Gemma: query_pre_attn_scalar^-0.5, pass it)
  bool causal = true;
  // Sliding window W (0 = none, causal only): key j is visible from query i iff j <= i and i − j < W,
  // i.e. the current token and the W − 1 before it (transformers' sliding_window convention).
  int window = 0;
  float softcap = 0.f;   // 0 = off; else scores = softcap·tanh(scores / softcap) after scaling, before masking
  int64_t q_offset = 0;  // query i has absolute position q_offset + i; keys have positions 0..S-1
  // Document masking (causal only): int32 [B, T], query (b, i) also needs key j >= key_start[b, i] (the
  // first position of its document in the row). Non-decreasing along each row; undefined = off.
  Tensor key_start;
};

// q [B, T, H, D], k and v [B, S, Hkv, D] f32, H a multiple of Hkv (GQA/MQA: query head h reads kv head
// h / (H / Hkv)) -> [B, T, H, D]. Softmax in f32 with max subtraction. With causal, q_offset + T <= S.
// Differentiable in q, k and v; saves the row log-sum-exp and recomputes the probabilities in backward.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& opt = {});

}  // namespace lathe
