// token_logprobs and linear_token_logprobs: fronts and gradient rules (row kernels from softmax_rows.cc,
// the chunk loops from chunked_head.cc).
#include "lathe/ops/logprob.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/ops/chunked_head.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/softmax_rows.h"
#include "lathe/ops/vec_math.h"

namespace lathe {

Tensor token_logprobs(const Tensor& logits_in, const Tensor& ids_in) {
  LATHE_CHECK_ARG(logits_in.defined() && logits_in.dtype() == DType::kF32 && logits_in.dim() >= 1,
                  "[token_logprobs] logits must be f32 [..., V]");
  Shape lead = logits_in.shape();
  lead.pop_back();
  LATHE_CHECK_ARG(ids_in.defined() && ids_in.dtype() == DType::kI32 && ids_in.shape() == lead,
                  "[token_logprobs] ids must be i32 ", shape_str(lead), " to match logits ",
                  shape_str(logits_in.shape()), ", got ", ids_in.defined() ? shape_str(ids_in.shape()) : "undefined");
  const Tensor logits = logits_in.contiguous(), ids = ids_in.contiguous();
  const int64_t v = logits.size(-1), n = ids.numel();
  const int32_t* idp = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(idp[i] >= 0 && idp[i] < v, "[token_logprobs] id ", idp[i], " at position ", i,
                    " is out of range for a vocabulary of ", v);
  const float* x = logits.data<float>();
  Tensor out = Tensor::empty(lead);
  Tensor lse = Tensor::empty({n});  // [N], kept for backward
  float *op = out.data<float>(), *lsep = lse.data<float>();
  parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      lsep[i] = row_logsumexp(x + i * v, v);
      op[i] = x[i * v + idp[i]] - lsep[i];
    }
  });

  if (needs_grad({&logits_in})) {
    Tensor xs = logits.detach(), is = ids.detach();
    record(out, "token_logprobs", {logits_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      // Gradient: dlogits[i] = −g_i·(softmax − onehot), i.e. the cross-entropy row rule with scale −g_i.
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(xs.shape());
      const float *xp = xs.data<float>(), *gp = g.data<float>(), *lp = lse.data<float>();
      const int32_t* ip = is.data<int32_t>();
      float* d = dx.data<float>();
      parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) row_softmax_backward(xp + i * v, lp[i], -gp[i], ip[i], d + i * v, v);
      });
      return {dx};
    });
  }
  return out;
}

namespace {

// Row r [N] of both [2, N] as its own tensor, differentiable: the gradient is g in row r, 0 elsewhere.
// Both rows' gradients meet in both's node, so the fused backward runs once for the two outputs.
Tensor pick_row(const Tensor& both, int64_t r) {
  const int64_t n = both.size(1);
  Tensor y = both.select(0, r).clone();
  if (needs_grad({&both}))
    record(y, "pick_row", {both}, [r, n](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor d = Tensor::zeros({2, n});
      std::copy(g.data<float>(), g.data<float>() + n, d.data<float>() + r * n);
      return {d};
    });
  return y;
}

// One row's chunk logits z [vc] -> d(out)/d(pre-cap logits) in place, for upstream gradients g_lp (log-prob)
// and g_h (entropy): dz_j = g_lp·([j == t] − p_j) − g_h·p_j·(z_j − lse + H), p_j = exp(z_j − lse), then
// ·(1 − (z_j/cap)²) through the cap (inv_cap 0: no cap, the factor is exactly 1). t < 0: target elsewhere.
void logprob_row_backward(float* z, int64_t vc, float lse, float h_minus_lse, float g_lp, float g_h, int64_t t,
                          float inv_cap) {
  const float u_t = t >= 0 ? z[t] * inv_cap : 0.f;  // read before z is overwritten
#pragma omp simd
  for (int64_t j = 0; j < vc; ++j) {
    const float p = vec::exp(z[j] - lse), u = z[j] * inv_cap;
    z[j] = -p * (g_lp + g_h * (z[j] + h_minus_lse)) * (1.f - u * u);
  }
  if (t >= 0) z[t] += g_lp * (1.f - u_t * u_t);
}

}  // namespace

TokenLogprobs linear_token_logprobs(const Tensor& hidden_in, const Tensor& weight_in, const Tensor& targets_in,
                                    const LinearTokenLogprobsOptions& opt) {
  const char* op = "linear_token_logprobs";
  const bool grad = needs_grad({&hidden_in, &weight_in});
  const ChunkedHead hd = make_chunked_head(
      op, hidden_in, weight_in,
      {.final_softcap = opt.final_softcap, .chunk_size = opt.chunk_size, .keep_logits_bytes = opt.keep_logits_bytes},
      grad);
  const int64_t n = hd.n, v = hd.v;
  const int ignore = opt.ignore_index;
  const bool ent = opt.want_entropy;
  LATHE_CHECK_ARG(targets_in.defined() && targets_in.dtype() == DType::kI32 && targets_in.dim() == 1 &&
                      targets_in.size(0) == n,
                  "[", op, "] targets must be i32 [", n, "], got ",
                  targets_in.defined() ? shape_str(targets_in.shape()) : "undefined");
  const Tensor targets = targets_in.contiguous();
  const int32_t* tg = targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(tg[i] == ignore || (tg[i] >= 0 && tg[i] < v), "[", op, "] target ", tg[i], " at row ", i,
                    " is outside [0, ", v, ") and is not ignore_index ", ignore);

  // Per row: online max, Σ exp(z − max), Σ exp(z − max)·(z − max) (entropy only) and the target's logit.
  std::vector<float> run_max(n, -std::numeric_limits<float>::infinity()), run_sum(n, 0.f), shifted(n, 0.f),
      target(n, 0.f);
  chunked_head_forward(hd, [&](int64_t i, int64_t v0, int64_t vc, float* z) {
    if (tg[i] == ignore) return;
    if (ent)
      row_entropy_update(z, vc, &run_max[i], &run_sum[i], &shifted[i]);
    else
      row_logsumexp_update(z, vc, &run_max[i], &run_sum[i]);
    if (tg[i] >= v0 && tg[i] < v0 + vc) target[i] = z[tg[i] - v0];
  });
  Tensor out = ent ? Tensor::empty({2, n}) : Tensor::empty({n});  // row 0 log-probs, row 1 entropy
  Tensor lse = Tensor::empty({n});                                 // [N], kept for backward
  float *lp = out.data<float>(), *hp = ent ? lp + n : nullptr, *lsep = lse.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const bool counted = tg[i] != ignore;
    lsep[i] = counted ? run_max[i] + std::log(run_sum[i]) : 0.f;
    lp[i] = counted ? target[i] - lsep[i] : 0.f;
    if (ent) hp[i] = counted ? std::log(run_sum[i]) - shifted[i] / run_sum[i] : 0.f;
  }

  if (grad) {
    const bool want_h = hidden_in.requires_grad(), want_w = weight_in.requires_grad();
    check_chunked_head_weight_grad(op, weight_in);
    const Tensor ts = targets.detach(), saved = out.detach();
    const float inv_cap = hd.cap > 0.f ? 1.f / hd.cap : 0.f;
    record(out, op, {hidden_in, weight_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();  // [N] or [2, N] like out
      const float *gl = g.data<float>(), *gh = ent ? gl + n : nullptr, *lsp = lse.data<float>();
      const float* hs = ent ? saved.data<float>() + n : nullptr;
      const int32_t* t = ts.data<int32_t>();
      const auto row = [&](int64_t i, int64_t v0, int64_t vc, float* z) {
        if (t[i] == ignore) {
          std::fill(z, z + vc, 0.f);
          return;
        }
        const int64_t col = t[i] >= v0 && t[i] < v0 + vc ? t[i] - v0 : -1;  // target column, if here
        logprob_row_backward(z, vc, lsp[i], ent ? hs[i] - lsp[i] : 0.f, gl[i], ent ? gh[i] : 0.f, col, inv_cap);
      };
      Tensor dh, dw;
      chunked_head_backward(hd, row, want_h, want_w, &dh, &dw);
      return {dh, dw};
    });
  }
  if (!ent) return {out, Tensor()};
  return {pick_row(out, 0), pick_row(out, 1)};
}

}  // namespace lathe
