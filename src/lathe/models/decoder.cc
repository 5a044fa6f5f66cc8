// The one decoder every family runs (DESIGN.md): embedding -> L x (attention block, MLP block) -> final
// norm, over the N rows of a ForwardBatch as [N, C] activations. Families differ only through
// ModelConfig (norm kind and placement, biases, q/k norms, rotary or learned positions, windows,
// soft-capping, dense / gated / sparse MLP). The batch decides only how attention sees the rows:
//   no store, B equal rows at 0..T-1 (training): the [B, T] attention;
//   no store, packed documents in rows of row_length: the [B, T] attention, keys from each sequence's start;
//   no store, any other sequences: a [1, N] view, each row's keys from its sequence start;
//   a KV store (prefill chunks, decode rows, mixes): KvStore::attention over each sequence's cached keys.
#include "lathe/autograd/node.h"
#include "lathe/models/kv_store.h"
#include "lathe/models/model.h"
#include "lathe/nn/linear.h"
#include "lathe/ops/activation.h"
#include "lathe/ops/attention.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/embedding.h"
#include "lathe/ops/gated_mlp.h"
#include "lathe/ops/layer_norm.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/moe.h"
#include "lathe/ops/reshape.h"
#include "lathe/ops/rms_norm.h"
#include "lathe/ops/rope.h"

namespace lathe {
namespace {

// How attention sees the N rows (kept by value: a recomputed layer re-reads it during the backward,
// after the batch may be gone).
struct RowLayout {
  int64_t B = 1, T = 0;     // the [B, T] view of the rows: equal rows or rows of packed documents, else (1, N)
  Tensor rope_positions;    // int32 [T] shared by the B rows (equal rows), else [B, T] or [N]
  Tensor key_start;         // int32 [B, T]: each row's first key, for packed sequences; undefined for equal rows
  const ForwardBatch* cached = nullptr;  // the batch, when it runs over a KV store (no autograd)
};

RowLayout row_layout(const ForwardBatch& batch) {
  RowLayout r;
  const int64_t N = batch.n_rows();
  if (batch.kv) {
    r.T = N;
    r.rope_positions = batch.positions;
    r.cached = &batch;
  } else if (const int64_t B = batch.equal_rows()) {
    r.B = B;
    r.T = N / B;
    r.rope_positions = batch.positions.slice(0, 0, r.T);  // 0..T-1
  } else if (batch.row_length > 0) {  // packed documents in rows: [B, T], keys from each row's sequence start
    r.T = batch.row_length;
    r.B = N / r.T;
    r.rope_positions = batch.positions.view({r.B, r.T});
    r.key_start = Tensor::empty({r.B, r.T}, DType::kI32);
    int32_t* ks = r.key_start.data<int32_t>();
    for (int64_t s = 0; s < batch.n_seqs(); ++s)
      for (int64_t i = batch.seq_starts[s]; i < batch.seq_starts[s + 1]; ++i)
        ks[i] = static_cast<int32_t>(batch.seq_starts[s] - (i / r.T) * r.T);
  } else {
    r.T = N;
    r.rope_positions = batch.positions;
    r.key_start = Tensor::empty({1, N}, DType::kI32);
    int32_t* ks = r.key_start.data<int32_t>();
    for (int64_t s = 0; s < batch.n_seqs(); ++s)
      for (int64_t i = batch.seq_starts[s]; i < batch.seq_starts[s + 1]; ++i)
        ks[i] = static_cast<int32_t>(batch.seq_starts[s]);
  }
  return r;
}

// Served adapters: consecutive sequences of one slot make one run of rows (the serving engine orders a
// step's sequences by slot, so each adapter is one run: two GEMMs per Linear, whatever the batch size).
std::vector<LoraRowRun> lora_row_runs(const ForwardBatch& batch) {
  std::vector<LoraRowRun> runs;
  for (int64_t s = 0; s < static_cast<int64_t>(batch.lora_slots.size()); ++s) {
    const int32_t slot = batch.lora_slots[static_cast<size_t>(s)];
    const int64_t begin = batch.seq_starts[s], end = batch.seq_starts[s + 1];
    if (slot == 0) continue;
    if (!runs.empty() && runs.back().slot == slot && runs.back().end == begin) {
      runs.back().end = end;
    } else {
      runs.push_back({.slot = slot, .begin = begin, .end = end});
    }
  }
  return runs;
}

Tensor norm(const ModelConfig& c, const Tensor& x, const Norm& n) {
  if (c.norm == NormKind::kLayer) return layer_norm(x, n.weight, n.bias, c.norm_eps);
  return rms_norm(x, n.weight, c.norm_eps, c.norm_weight_offset);
}

// x [N, C] -> attention output projected back to [N, C].
Tensor attention_block(const ModelConfig& c, const LayerConfig& lc, const Attention& w,
                       std::span<const float> inv_freq, const RowLayout& rows, const ForwardOptions& o,
                       const Tensor& x_in, int layer) {
  const int64_t N = x_in.size(0), B = rows.B, T = rows.T, H = c.n_heads, Hkv = c.n_kv_heads, D = c.head_dim;
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
    q = rope(q, rows.rope_positions, inv_freq);
    k = rope(k, rows.rope_positions, inv_freq);
  }
  AttentionOptions opts;
  opts.scale = c.attn_scale;
  opts.causal = true;
  opts.window = lc.window;
  opts.softcap = c.attn_softcap;
  Tensor attn;  // [N, H * D]
  if (rows.cached) {
    LATHE_CHECK_ARG(!grad_enabled() || !(q.requires_grad() || k.requires_grad() || v.requires_grad()),
                    "[decoder] a forward over a KV store records no gradients (run it under NoGradGuard)");
    q = q.contiguous();
    k = k.contiguous();
    v = v.contiguous();
    attn = Tensor::empty({N, H * D});
    rows.cached->kv->attention(layer, *rows.cached, q.data<float>(), k.data<float>(), v.data<float>(),
                               attn.data<float>(), opts);
  } else {
    opts.key_start = rows.key_start;  // packed sequences (undefined: equal rows)
    attn = reshape(scaled_dot_product_attention(q, k, v, opts), {N, H * D});
  }
  return linear(attn, w.o_proj, o);
}

// x [N, C] -> [N, C].
Tensor mlp_block(const ModelConfig& c, const LayerConfig& lc, const DecoderLayer& w, const ForwardOptions& o,
                 const Tensor& x) {
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
      const Experts& e = w.moe.experts;
      return moe(x, w.moe.router, e.gate_proj, e.up_proj, e.down_proj, mo);
    }
    case MlpKind::kCount: break;
  }
  throw NotImplemented("[decoder] unknown MLP kind");
}

}  // namespace

std::vector<std::vector<float>> rotary_tables(const ModelConfig& c) {
  std::vector<std::vector<float>> t(c.n_layers);
  if (!c.learned_positions)
    for (int l = 0; l < c.n_layers; ++l) t[l] = rope_inv_freq(c.layers[l].rope);
  return t;
}

Tensor decoder_hidden(const ModelConfig& c, const ModelWeights& w, std::span<const std::vector<float>> inv_freq,
                      const ForwardBatch& batch, const ForwardOptions& o_in) {
  check_forward_batch(batch);
  const std::vector<LoraRowRun> lora_runs = lora_row_runs(batch);
  LATHE_CHECK_ARG(lora_runs.empty() || !grad_enabled(),
                  "[forward] served LoRA adapters (ForwardBatch::lora_slots) are inference-only: run under NoGradGuard");
  ForwardOptions o = o_in;
  o.lora_rows = lora_runs;  // outlives every use: no gradient is recorded, so nothing re-runs a block later
  LATHE_CHECK_ARG(static_cast<int64_t>(inv_freq.size()) == c.n_layers, "[decoder] ", inv_freq.size(),
                  " rotary tables for ", c.n_layers, " layers");
  if (c.learned_positions) {
    const int32_t* p = batch.positions.data<int32_t>();
    for (int64_t i = 0; i < batch.n_rows(); ++i)
      LATHE_CHECK_ARG(p[i] < c.max_positions, "[decoder] position ", p[i], " (row ", i, ") exceeds the model's ",
                      c.max_positions, " learned position embeddings");
  }
  if (batch.kv) {
    const KvLayout want{static_cast<int>(c.n_layers), static_cast<int>(c.n_heads), static_cast<int>(c.n_kv_heads),
                        static_cast<int>(c.head_dim)};
    const KvLayout have = batch.kv->layout();
    LATHE_CHECK_ARG(have == want, "[forward] the KV store holds L=", have.n_layers, " H=", have.n_heads,
                    " Hkv=", have.n_kv_heads, " D=", have.head_dim, " but the model has L=", want.n_layers,
                    " H=", want.n_heads, " Hkv=", want.n_kv_heads, " D=", want.head_dim);
  }
  const RowLayout rows = row_layout(batch);
  Tensor x = embedding(w.embed_tokens.weight, batch.tokens);  // [N, C]
  if (c.embed_scale != 1.f) x = scale(x, c.embed_scale);
  if (c.learned_positions) x = add(x, embedding(w.embed_positions.weight, batch.positions));

  for (int l = 0; l < c.n_layers; ++l) {
    const DecoderLayer& lw = w.layers[l];
    const LayerConfig& lc = c.layers[l];
    const std::span<const float> freq = inv_freq[l];
    // One transformer block: x [N, C] -> x [N, C]. (c, w and the tables outlive any backward pass.)
    const auto block = [&c, &lc, &lw, freq, rows, o, l](const Tensor& xin) {
      Tensor h = attention_block(c, lc, lw.self_attn, freq, rows, o, norm(c, xin, lw.input_layernorm), l);
      if (c.sandwich_norms) h = norm(c, h, lw.post_attention_layernorm);
      Tensor xo = add(xin, h);
      Tensor m = mlp_block(c, lc, lw, o, norm(c, xo, lw.pre_feedforward_layernorm));
      if (c.sandwich_norms) m = norm(c, m, lw.post_feedforward_layernorm);
      return add(xo, m);
    };
    x = o.recompute && !batch.kv ? checkpoint(block, x) : block(x);
  }
  if (batch.output_rows.defined()) x = embedding(x, batch.output_rows);  // [M, C]: a row gather
  return norm(c, x, w.norm);
}

}  // namespace lathe
