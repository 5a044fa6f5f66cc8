// The one decoder every family runs (DESIGN.md): embedding -> L x (attention block, MLP block) -> final
// norm. Families differ only through ModelConfig (norm kind and placement, biases, q/k norms, rotary or
// learned positions, windows, soft-capping, dense / gated / sparse MLP).
#include "lathe/autograd/node.h"
#include "lathe/models/model.h"
#include "lathe/nn/linear.h"
#include "lathe/ops/activation.h"
#include "lathe/ops/attention.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/embedding.h"
#include "lathe/ops/gated_mlp.h"
#include "lathe/ops/layer_norm.h"
#include "lathe/ops/moe.h"
#include "lathe/ops/reshape.h"
#include "lathe/ops/rms_norm.h"
#include "lathe/ops/rope.h"

namespace lathe {
namespace {

Tensor norm(const ModelConfig& c, const Tensor& x, const Norm& n) {
  if (c.norm == NormKind::kLayer) return layer_norm(x, n.weight, n.bias, c.norm_eps);
  return rms_norm(x, n.weight, c.norm_eps, c.norm_weight_offset);
}

// x [B, T, C] -> attention output projected back to [B, T, C].
Tensor attention_block(const ModelConfig& c, const LayerConfig& lc, const Attention& w, const Tensor& x_in,
                       const Tensor& positions, const Tensor& key_start, int layer, KvCache* cache,
                       const ForwardOptions& o) {
  const int64_t B = x_in.size(0), T = x_in.size(1), H = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim;
  const Tensor x = linear_input(x_in, w.q_proj, o);  // rounded once for q, k and v
  Tensor q = reshape(linear(x, w.q_proj, o), {B, T, H, D});
  auto [k_flat, v_flat] = linear_pair(x, w.k_proj, w.v_proj, o);  // equal shapes, with or without GQA
  Tensor k = reshape(k_flat, {B, T, Hkv, D});
  Tensor v = reshape(v_flat, {B, T, Hkv, D});
  if (c.qk_norm) {  // RMSNorm over each head's D features
    q = rms_norm(q, w.q_norm.weight, c.norm_eps, c.norm_weight_offset);
    k = rms_norm(k, w.k_norm.weight, c.norm_eps, c.norm_weight_offset);
  }
  if (!c.learned_positions) {
    const std::vector<float> inv_freq = rope_inv_freq(lc.rope);
    q = rope(q, positions, inv_freq);
    k = rope(k, positions, inv_freq);
  }
  AttentionOptions opts;
  opts.scale = c.attn_scale;
  opts.causal = true;
  opts.window = lc.window;
  opts.softcap = c.attn_softcap;
  opts.key_start = key_start;  // document masking (undefined: off)
  Tensor attn;
  if (cache) {
    const int64_t start = cache->length();
    LATHE_CHECK_ARG(start + T <= cache->capacity(), "[generate] KV cache of ", cache->capacity(),
                    " tokens is full (", start, " cached + ", T, " new)");
    cache->keys(layer).slice(1, start, start + T).copy_from(k);
    cache->values(layer).slice(1, start, start + T).copy_from(v);
    opts.q_offset = start;
    attn = scaled_dot_product_attention(q, cache->keys(layer).slice(1, 0, start + T),
                                        cache->values(layer).slice(1, 0, start + T), opts);
  } else {
    attn = scaled_dot_product_attention(q, k, v, opts);
  }
  return linear(reshape(attn, {B, T, H * D}), w.o_proj, o);
}

// x [B, T, C] -> [B, T, C].
Tensor mlp_block(const ModelConfig& c, const LayerConfig& lc, const DecoderLayer& w, const Tensor& x,
                 const ForwardOptions& o) {
  const Mlp& m = w.mlp;
  switch (lc.mlp) {
    case MlpKind::kGated: {
      auto [gate, up] = linear_pair(x, m.gate_proj, m.up_proj, o);
      return linear(gated_activation(gate, up, c.act), m.down_proj, o);
    }
    case MlpKind::kPlain:
      return linear(activation(linear(x, m.up_proj, o), c.act), m.down_proj, o);
    case MlpKind::kMoe: {
      MoeOptions mo;
      mo.top_k = static_cast<int>(c.top_k);
      mo.norm_topk_prob = c.norm_topk_prob;
      const Tensor flat = reshape(x, {-1, c.hidden});
      const Experts& e = w.moe.experts;
      return reshape(moe(flat, w.moe.router, e.gate_proj, e.up_proj, e.down_proj, mo), x.shape());
    }
    case MlpKind::kCount: break;
  }
  throw NotImplemented("[decoder] unknown MLP kind");
}

}  // namespace

Tensor decoder_hidden(const ModelConfig& c, const ModelWeights& w, const Tensor& ids, KvCache* cache,
                      const DocumentLayout* docs, const ForwardOptions& o) {
  LATHE_CHECK_ARG(ids.dim() == 2 && ids.dtype() == DType::kI32, "[decoder] ids must be int32 [B, T], got ",
                  dtype_name(ids.dtype()), " ", shape_str(ids.shape()));
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t start = cache ? cache->length() : 0;
  LATHE_CHECK_ARG(!cache || B == 1, "[decoder] the KV cache holds one sequence, got batch ", B);
  if (c.learned_positions)
    LATHE_CHECK_ARG(start + T <= c.max_positions, "[decoder] ", start + T, " positions exceed the model's ",
                    c.max_positions, " learned position embeddings");

  Tensor positions, key_start;  // positions [B, T]
  if (docs) {  // packed documents: positions restart per document, attention stays inside each one
    LATHE_CHECK_ARG(!cache && docs->positions.shape() == ids.shape() && docs->key_start.shape() == ids.shape() &&
                        docs->positions.dtype() == DType::kI32,
                    "[decoder] document layout must be int32 [B, T] like the ids (and no KV cache)");
    positions = docs->positions.contiguous();
    key_start = docs->key_start;
  } else {  // every row at start, start + 1, ...
    positions = Tensor::empty({B, T}, DType::kI32);
    int32_t* pp = positions.data<int32_t>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) pp[b * T + t] = static_cast<int32_t>(start + t);
  }
  Tensor x = embedding(w.embed_tokens.weight, ids);  // [B, T, C]
  if (c.embed_scale != 1.f) x = scale(x, c.embed_scale);
  if (c.learned_positions) x = add(x, embedding(w.embed_positions.weight, positions));
  // [T] when every row has the same positions, else [B, T].
  const Tensor rope_positions = docs ? positions : positions.select(0, 0).contiguous();

  for (int l = 0; l < c.n_layers; ++l) {
    const DecoderLayer& lw = w.layers[l];
    const LayerConfig& lc = c.layers[l];
    // One transformer block: x [B, T, C] -> x [B, T, C]. (c and w outlive any backward pass.)
    const auto block = [&c, &lc, &lw, rope_positions, key_start, l, cache, o](const Tensor& xin) {
      Tensor h = attention_block(c, lc, lw.self_attn, norm(c, xin, lw.input_layernorm), rope_positions, key_start, l,
                                 cache, o);
      if (c.sandwich_norms) h = norm(c, h, lw.post_attention_layernorm);
      Tensor xo = add(xin, h);
      Tensor m = mlp_block(c, lc, lw, norm(c, xo, lw.pre_feedforward_layernorm), o);
      if (c.sandwich_norms) m = norm(c, m, lw.post_feedforward_layernorm);
      return add(xo, m);
    };
    x = o.recompute && !cache ? checkpoint(block, x) : block(x);
  }
  if (cache) cache->advance(T);
  return norm(c, x, w.norm);
}

}  // namespace lathe
