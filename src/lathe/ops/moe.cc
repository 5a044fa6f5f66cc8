// moe front, routing, grouped-GEMM experts and gradient. Tokens are grouped per expert so each expert
// runs three GEMMs over its token rows (not one GEMV per token); the K expert outputs of a token are then
// summed in ascending expert order, the order of transformers' index_add_ loop.
#include "lathe/ops/moe.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/context.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

// Who goes where: per token the K chosen experts (ascending index) and their weights, and the N·K
// (token, slot) pairs laid out as rows grouped by expert, tokens ascending within an expert.
struct MoeRouting {
  int64_t n_tokens = 0, n_experts = 0, top_k = 0;
  std::vector<float> probs;         // [N, E] softmax of the router logits
  std::vector<int32_t> expert;      // [N, K] chosen experts, ascending
  std::vector<float> weight;        // [N, K] their routing weights (normalised if asked)
  std::vector<int64_t> offsets;     // [E + 1] row range of each expert in the grouped buffers
  std::vector<int64_t> row_token;   // [N·K] token of each grouped row
  std::vector<int64_t> slot_row;    // [N·K] grouped row of (token n, slot k)
};

// Everything backward needs, kept alive by the gradient rule.
struct MoeSaved {
  Tensor x, router, w_gate, w_up, w_down;  // contiguous, detached
  MoeRouting route;
  std::vector<float> xg, gate, up, y;  // grouped rows: x [N·K, C], gate and up [N·K, F], expert out [N·K, C]
  bool norm_topk_prob = false;
};

// c[m, n] = alpha·op(a)·op(b) + beta·c, with b an f32 tensor (or bf16 expert weights) from element b_offset.
void gemm_into(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const Tensor& b, int64_t b_offset, int64_t ldb, float* c, int64_t ldc, float beta,
               const ThreadPool& pool) {
  if (m == 0 || n == 0) return;
  if (b.dtype() == DType::kBF16)
    cpu::gemm(cpu::GemmArgs<float, bf16>{trans_a, trans_b, m, n, k, a, lda, b.data<bf16>() + b_offset, ldb, c, ldc,
                                         1.f, beta},
              pool);
  else
    cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a, lda, b.data<float>() + b_offset, ldb, c, ldc,
                                          1.f, beta},
              pool);
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc, float beta, const ThreadPool& pool) {
  if (m == 0 || n == 0) return;
  cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, 1.f, beta}, pool);
}

// Router softmax (f32, max-subtracted, as F.softmax(..., dtype=float)), top-k and the per-expert grouping.
MoeRouting route_tokens(const float* logits, int64_t n_tokens, int64_t n_experts, int top_k, bool norm_topk_prob) {
  MoeRouting r;
  r.n_tokens = n_tokens;
  r.n_experts = n_experts;
  r.top_k = top_k;
  const int64_t N = n_tokens, E = n_experts, K = top_k;
  r.probs.assign(logits, logits + N * E);
  r.expert.resize(N * K);
  r.weight.resize(N * K);
  std::vector<int64_t> count(E, 0);
  for (int64_t n = 0; n < N; ++n) {
    float* p = r.probs.data() + n * E;
    float mx = -std::numeric_limits<float>::infinity(), sum = 0.f;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, p[e]);
#pragma omp simd reduction(+ : sum)
    for (int64_t e = 0; e < E; ++e) {
      p[e] = vec::exp(p[e] - mx);
      sum += p[e];
    }
    const float inv = 1.f / sum;
    for (int64_t e = 0; e < E; ++e) p[e] *= inv;
    // torch.topk order: largest first, ties to the lower index (strict > keeps the first maximum).
    int32_t* sel = r.expert.data() + n * K;
    float wsum = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      int32_t best = -1;
      for (int64_t e = 0; e < E; ++e) {
        if (std::find(sel, sel + k, static_cast<int32_t>(e)) != sel + k) continue;
        if (best < 0 || p[e] > p[best]) best = static_cast<int32_t>(e);
      }
      sel[k] = best;
      wsum += p[best];
    }
    std::sort(sel, sel + K);  // summation order of the expert loop
    for (int64_t k = 0; k < K; ++k) {
      r.weight[n * K + k] = norm_topk_prob ? p[sel[k]] / wsum : p[sel[k]];
      ++count[sel[k]];
    }
  }
  r.offsets.assign(E + 1, 0);
  for (int64_t e = 0; e < E; ++e) r.offsets[e + 1] = r.offsets[e] + count[e];
  r.row_token.resize(N * K);
  r.slot_row.resize(N * K);
  std::vector<int64_t> next(r.offsets.begin(), r.offsets.end() - 1);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = next[r.expert[n * K + k]]++;
      r.row_token[row] = n;
      r.slot_row[n * K + k] = row;
    }
  return r;
}

inline float silu(float g) { return g / (1.f + vec::exp(-g)); }  // torch's silu: x / (1 + exp(-x))

// Forward: fills s.xg, s.gate, s.up, s.y and writes out [N, C].
void moe_forward(MoeSaved& s, int64_t width, int64_t ffn, float* out) {
  const ThreadPool& pool = current_context().pool;
  const MoeRouting& r = s.route;
  const int64_t C = width, F = ffn, K = r.top_k, rows = r.n_tokens * K;
  const float* x = s.x.data<float>();
  s.xg.resize(rows * C);
  s.gate.resize(rows * F);
  s.up.resize(rows * F);
  s.y.resize(rows * C);
  std::vector<float> h(rows * F);
  pool.parallel_for(rows, [&](int64_t row, int) { std::copy_n(x + r.row_token[row] * C, C, s.xg.data() + row * C); });
  for (int64_t e = 0; e < r.n_experts; ++e) {
    const int64_t r0 = r.offsets[e], m = r.offsets[e + 1] - r0;
    if (m == 0) continue;
    gemm_into(false, true, m, F, C, s.xg.data() + r0 * C, C, s.w_gate, e * F * C, C, s.gate.data() + r0 * F, F, 0.f, pool);
    gemm_into(false, true, m, F, C, s.xg.data() + r0 * C, C, s.w_up, e * F * C, C, s.up.data() + r0 * F, F, 0.f, pool);
    float *g = s.gate.data() + r0 * F, *u = s.up.data() + r0 * F, *hp = h.data() + r0 * F;
#pragma omp simd
    for (int64_t i = 0; i < m * F; ++i) hp[i] = silu(g[i]) * u[i];
    gemm_into(false, true, m, C, F, hp, F, s.w_down, e * C * F, F, s.y.data() + r0 * C, C, 0.f, pool);
  }
  pool.parallel_for(r.n_tokens, [&](int64_t n, int) {
    float* o = out + n * C;
    std::fill(o, o + C, 0.f);
    for (int64_t k = 0; k < K; ++k) {  // ascending expert index
      const float w = r.weight[n * K + k];
      const float* y = s.y.data() + r.slot_row[n * K + k] * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) o[c] += y[c] * w;
    }
  });
}

struct MoeGrads {
  Tensor dx, drouter, dw_gate, dw_up, dw_down;  // undefined where not wanted
};

// Backward through the experts (SwiGLU: h = silu(g)·u, silu' = σ(g)·(1 + g·(1 − σ(g)))), the weighted
// sum, the top-k normalisation and the router softmax. Returns fresh gradients (nothing accumulated).
MoeGrads moe_backward(const MoeSaved& s, const float* dout, bool want_x, bool want_router, bool want_gate,
                      bool want_up, bool want_down) {
  const ThreadPool& pool = current_context().pool;
  const MoeRouting& r = s.route;
  const int64_t N = r.n_tokens, E = r.n_experts, K = r.top_k, rows = N * K;
  const int64_t C = s.x.size(1), F = s.w_gate.size(1);
  MoeGrads gr;
  // dY[row] = w · dout[token]; dweight[n, k] = dout[n] · y[row].
  std::vector<float> dy(rows * C), dweight(rows);
  pool.parallel_for(N, [&](int64_t n, int) {
    const float* dn = dout + n * C;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = r.slot_row[n * K + k];
      const float w = r.weight[n * K + k], *y = s.y.data() + row * C;
      float* d = dy.data() + row * C;
      float dot = 0.f;
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < C; ++c) {
        d[c] = w * dn[c];
        dot += dn[c] * y[c];
      }
      dweight[n * K + k] = dot;
    }
  });
  const bool want_x_path = want_x || want_gate || want_up;
  if (want_gate) gr.dw_gate = Tensor::zeros(s.w_gate.shape());
  if (want_up) gr.dw_up = Tensor::zeros(s.w_up.shape());
  if (want_down) gr.dw_down = Tensor::zeros(s.w_down.shape());
  std::vector<float> dg(rows * F), du(rows * F), h(want_down ? rows * F : 0), dxg(want_x ? rows * C : 0);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = r.offsets[e], m = r.offsets[e + 1] - r0;
    if (m == 0) continue;
    const float *g = s.gate.data() + r0 * F, *u = s.up.data() + r0 * F, *dye = dy.data() + r0 * C;
    float *dge = dg.data() + r0 * F, *due = du.data() + r0 * F;
    if (want_down) {  // dW_down[e] [C, F] = dYᵀ · h
      float* he = h.data() + r0 * F;
#pragma omp simd
      for (int64_t i = 0; i < m * F; ++i) he[i] = silu(g[i]) * u[i];
      gemm_f32(true, false, C, F, m, dye, C, he, F, gr.dw_down.data<float>() + e * C * F, F, 0.f, pool);
    }
    if (!want_x_path) continue;
    gemm_into(false, false, m, F, C, dye, C, s.w_down, e * C * F, F, dge, F, 0.f, pool);  // dh = dY · W_down[e]
#pragma omp simd
    for (int64_t i = 0; i < m * F; ++i) {
      const float sg = 1.f / (1.f + vec::exp(-g[i]));
      const float dh = dge[i];
      due[i] = dh * (g[i] * sg);
      dge[i] = dh * u[i] * (sg * (1.f + g[i] * (1.f - sg)));
    }
    const float* xge = s.xg.data() + r0 * C;
    if (want_gate) gemm_f32(true, false, F, C, m, dge, F, xge, C, gr.dw_gate.data<float>() + e * F * C, C, 0.f, pool);
    if (want_up) gemm_f32(true, false, F, C, m, due, F, xge, C, gr.dw_up.data<float>() + e * F * C, C, 0.f, pool);
    if (want_x) {  // dxg = dg · W_gate[e] + du · W_up[e]
      gemm_into(false, false, m, C, F, dge, F, s.w_gate, e * F * C, C, dxg.data() + r0 * C, C, 0.f, pool);
      gemm_into(false, false, m, C, F, due, F, s.w_up, e * F * C, C, dxg.data() + r0 * C, C, 1.f, pool);
    }
  }
  // Routing: w_k = p_k (/ Z, Z = Σ_sel p) -> dp_k = dw_k (or (dw_k − Σ_j dw_j·w_j) / Z), then softmax:
  // dlogit_e = p_e · (dp_e − Σ_sel dp_j·p_j). Unselected experts get only the softmax coupling term.
  std::vector<float> dlogits(N * E);
  for (int64_t n = 0; n < N; ++n) {
    const float* p = r.probs.data() + n * E;
    const int32_t* sel = r.expert.data() + n * K;
    float dp[64];  // K <= 64 is checked by the front
    float z = 0.f, wdot = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      z += p[sel[k]];
      wdot += dweight[n * K + k] * r.weight[n * K + k];
    }
    float pdot = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      dp[k] = s.norm_topk_prob ? (dweight[n * K + k] - wdot) / z : dweight[n * K + k];
      pdot += dp[k] * p[sel[k]];
    }
    float* dl = dlogits.data() + n * E;
    for (int64_t e = 0; e < E; ++e) dl[e] = -p[e] * pdot;
    for (int64_t k = 0; k < K; ++k) dl[sel[k]] += p[sel[k]] * dp[k];
  }
  if (want_x) {
    gr.dx = Tensor::empty({N, C});
    float* dx = gr.dx.data<float>();
    pool.parallel_for(N, [&](int64_t n, int) {
      float* d = dx + n * C;
      std::fill(d, d + C, 0.f);
      for (int64_t k = 0; k < K; ++k) {
        const float* src = dxg.data() + r.slot_row[n * K + k] * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) d[c] += src[c];
      }
    });
    gemm_f32(false, false, N, C, E, dlogits.data(), E, s.router.data<float>(), C, dx, C, 1.f, pool);
  }
  if (want_router) {  // drouter [E, C] = dlogitsᵀ · x
    gr.drouter = Tensor::empty(s.router.shape());
    gemm_f32(true, false, E, C, N, dlogits.data(), E, s.x.data<float>(), C, gr.drouter.data<float>(), C, 0.f, pool);
  }
  return gr;
}

}  // namespace

Tensor moe(const Tensor& x_in, const Tensor& router_in, const Tensor& w_gate_in, const Tensor& w_up_in,
           const Tensor& w_down_in, const MoeOptions& opt) {
  LATHE_CHECK_ARG(x_in.dim() == 2 && x_in.dtype() == DType::kF32, "[moe] x must be f32 [N, C], got ",
                  shape_str(x_in.shape()), " ", dtype_name(x_in.dtype()));
  const int64_t N = x_in.size(0), C = x_in.size(1);
  LATHE_CHECK_ARG(router_in.dim() == 2 && router_in.size(1) == C && router_in.dtype() == DType::kF32,
                  "[moe] router must be f32 [E, ", C, "], got ", shape_str(router_in.shape()));
  const int64_t E = router_in.size(0);
  LATHE_CHECK_ARG(w_gate_in.dim() == 3 && w_gate_in.size(0) == E && w_gate_in.size(2) == C &&
                      w_up_in.shape() == w_gate_in.shape(),
                  "[moe] w_gate and w_up must be [", E, ", F, ", C, "], got ", shape_str(w_gate_in.shape()), " and ",
                  shape_str(w_up_in.shape()));
  const int64_t F = w_gate_in.size(1);
  LATHE_CHECK_ARG(w_down_in.dim() == 3 && w_down_in.size(0) == E && w_down_in.size(1) == C && w_down_in.size(2) == F,
                  "[moe] w_down must be [", E, ", ", C, ", ", F, "], got ", shape_str(w_down_in.shape()));
  for (const Tensor* w : {&w_gate_in, &w_up_in, &w_down_in})
    LATHE_CHECK_ARG(w->dtype() == DType::kF32 || w->dtype() == DType::kBF16,
                    "[moe] expert weights must be f32 or bf16, got ", dtype_name(w->dtype()));
  LATHE_CHECK_ARG(opt.top_k >= 1 && opt.top_k <= E && opt.top_k <= 64, "[moe] top_k must be in [1, min(E, 64)], got ",
                  opt.top_k, " with E = ", E);
  auto s = std::make_shared<MoeSaved>();
  s->x = x_in.contiguous().detach();
  s->router = router_in.contiguous().detach();
  s->w_gate = w_gate_in.contiguous().detach();
  s->w_up = w_up_in.contiguous().detach();
  s->w_down = w_down_in.contiguous().detach();
  s->norm_topk_prob = opt.norm_topk_prob;
  std::vector<float> logits(N * E);  // [N, E] = x · routerᵀ
  gemm_f32(false, true, N, E, C, s->x.data<float>(), C, s->router.data<float>(), C, logits.data(), E, 0.f,
           current_context().pool);
  s->route = route_tokens(logits.data(), N, E, opt.top_k, opt.norm_topk_prob);
  Tensor out = Tensor::empty({N, C});
  moe_forward(*s, C, F, out.data<float>());

  if (needs_grad({&x_in, &router_in, &w_gate_in, &w_up_in, &w_down_in})) {
    const bool want_x = x_in.requires_grad(), want_router = router_in.requires_grad(),
               want_gate = w_gate_in.requires_grad(), want_up = w_up_in.requires_grad(),
               want_down = w_down_in.requires_grad();
    LATHE_CHECK_ARG(s->w_gate.dtype() == DType::kF32 && s->w_up.dtype() == DType::kF32 &&
                        s->w_down.dtype() == DType::kF32,
                    "[moe] gradients need f32 expert weights (bf16 is inference-only)");
    record(out, "moe", {x_in, router_in, w_gate_in, w_up_in, w_down_in},
           [s, want_x, want_router, want_gate, want_up, want_down](const Tensor& g_in) -> std::vector<Tensor> {
             const Tensor g = g_in.contiguous();  // [N, C]
             MoeGrads gr = moe_backward(*s, g.data<float>(), want_x, want_router, want_gate, want_up, want_down);
             return {gr.dx, gr.drouter, gr.dw_gate, gr.dw_up, gr.dw_down};
           });
  }
  return out;
}

}  // namespace lathe
