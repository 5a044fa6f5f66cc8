// Scaled dot-product attention (training / prefill, differentiable) and the single-token decode kernel
// over a KV cache. Masks follow transformers: causal, optional sliding window, optional Gemma-2 softcap.
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

// One new token against a contiguous KV cache that already holds it (its position is S − 1).
struct AttentionDecodeArgs {
  const float* q = nullptr;        // [H, D]
  const float* k_cache = nullptr;  // [S, Hkv, D]
  const float* v_cache = nullptr;  // [S, Hkv, D]
  float* out = nullptr;            // [H, D]
  float* scratch = nullptr;        // [H, S] floats: attention_decode_scratch_floats(H, S)
  int n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t seq_len = 0;  // S >= 1
};

inline int64_t attention_decode_scratch_floats(int n_heads, int64_t seq_len) { return n_heads * seq_len; }

// No autograd and no allocation; parallel over heads. opt.causal and opt.q_offset are implied (the
// query is the last cached position); opt.scale, opt.window and opt.softcap apply as above.
void attention_decode(const AttentionDecodeArgs& args, const AttentionOptions& opt, const ThreadPool& pool);

}  // namespace lathe
