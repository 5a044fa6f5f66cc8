// token_logprobs and linear_token_logprobs: fronts and gradient rules (row kernels from softmax_rows.cc,
// the chunk loops from chunked_head.cc).
#include "lathe/ops/logprob.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
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
// and g_h (entropy), of the distribution of x = z·inv_t: dx_j = g_lp·([j == t] − p_j) − g_h·p_j·(x_j − lse + H),
// p_j = exp(x_j − lse), then ·inv_t and ·(1 − (z_j/cap)²) through the cap (inv_cap 0: no cap; inv_t 1: no
// temperature; both factors are then exactly 1). t < 0: target elsewhere.
void logprob_row_backward(float* z, int64_t vc, float lse, float h_minus_lse, float g_lp, float g_h, int64_t t,
                          float inv_cap, float inv_t = 1.f) {
  const float u_t = t >= 0 ? z[t] * inv_cap : 0.f;  // read before z is overwritten
#pragma omp simd
  for (int64_t j = 0; j < vc; ++j) {
    const float x = z[j] * inv_t, p = vec::exp(x - lse), u = z[j] * inv_cap;
    z[j] = -p * (g_lp + g_h * (x + h_minus_lse)) * inv_t * (1.f - u * u);
  }
  if (t >= 0) z[t] += g_lp * inv_t * (1.f - u_t * u_t);
}

// One token of a row under the sampler's processing: its processed logit z / T and its id.
struct RankedToken {
  float z;
  int32_t id;
};
// The sampler's ranking (infer/logit_filters.h TokenRank): larger z first, lower id first.
bool ranks_before(const RankedToken& a, const RankedToken& b) { return a.z > b.z || (a.z == b.z && a.id < b.id); }

// A row's kept set: every token ranked up to `last` (by z / T, then id), plus `extra` (a target ranked after
// it; −1: none). The default keeps every token.
struct KeptSet {
  RankedToken last{-std::numeric_limits<float>::infinity(), std::numeric_limits<int32_t>::max()};
  int32_t extra = -1;
  bool contains(float z, int32_t id) const { return !ranks_before(last, {z, id}) || id == extra; }
};

// Running max m, Σ exp(x − m) and Σ exp(x − m)·(x − m) of one value at a time (row_entropy_update's sums).
void online_update(float x, float* m, float* s, float* sh) {
  if (x > *m) {
    if (*s > 0.f) {  // rescale: Σ e^(x−m')(x−m') = e^(m−m')·(sh + (m − m')·s)
      const float f = std::exp(*m - x);
      *sh = f * (*sh + (*m - x) * *s);
      *s *= f;
    }
    *m = x;
  }
  const float d = x - *m, e = std::exp(d);
  *s += e;
  *sh += e * d;
}

// processed_forward's row rule: logprob_row_backward on x = z / T over the kept set (p = 0 off it), times
// 1/T (and the cap's 1 − (z/cap)²).
void processed_row_backward(float* z, int64_t v0, int64_t vc, float lse, float h_minus_lse, float g_lp, float g_h,
                            int64_t t, float inv_cap, float temp, const KeptSet& kept) {
  const float inv_t = 1.f / temp;
  const float u_t = t >= 0 ? z[t] * inv_cap : 0.f;  // read before z is overwritten
  for (int64_t j = 0; j < vc; ++j) {
    const float x = z[j] / temp, u = z[j] * inv_cap;
    const float p = kept.contains(x, static_cast<int32_t>(v0 + j)) ? std::exp(x - lse) : 0.f;
    z[j] = -p * (g_lp + g_h * (x + h_minus_lse)) * inv_t * (1.f - u * u);
  }
  if (t >= 0) z[t] += g_lp * inv_t * (1.f - u_t * u_t);
}

// The processed forward (temperature, top-k, top-p: LogprobProcessing) of linear_token_logprobs: fills lp,
// entropy (may be null) and lse [N] of the kept distributions, and each row's kept set.
void processed_forward(const ChunkedHead& hd, const int32_t* tg, int ignore, const LogprobProcessing& pr, float* lp,
                       float* hp, float* lsep, std::vector<KeptSet>& kept) {
  const int64_t n = hd.n, v = hd.v;
  const float temp = pr.temperature;
  const bool truncate = pr.truncates(v);
  const auto k = static_cast<size_t>(pr.top_k > 0 && pr.top_k < v ? pr.top_k : 0);
  std::vector<float> run_max(n, -std::numeric_limits<float>::infinity()), run_sum(n, 0.f), shifted(n, 0.f),
      target(n, 0.f);
  std::vector<std::vector<RankedToken>> cand(static_cast<size_t>(n));  // top-k: a heap, worst first
  // Pass 1: the target's processed logit; with top-k each row's k best (a heap), else the full processed row's
  // sums (vectorised, over a scaled copy of the chunk): its entropy and lse, or with top-p alone the floor of
  // pass 2's candidates.
  chunked_head_forward(hd, [&](int64_t i, int64_t v0, int64_t vc, const float* z) {
    if (tg[i] == ignore) return;
    if (tg[i] >= v0 && tg[i] < v0 + vc) target[i] = z[tg[i] - v0] / temp;
    if (k == 0) {
      std::vector<float> x(z, z + vc);
      for (float& a : x) a /= temp;  // a division, as the sampler's: the same floats
      if (truncate)
        row_logsumexp_update(x.data(), vc, &run_max[i], &run_sum[i]);
      else
        row_entropy_update(x.data(), vc, &run_max[i], &run_sum[i], &shifted[i]);
      return;
    }
    std::vector<RankedToken>& c = cand[static_cast<size_t>(i)];
    for (int64_t j = 0; j < vc; ++j) {
      const RankedToken t{z[j] / temp, static_cast<int32_t>(v0 + j)};
      if (c.size() < k) {
        c.push_back(t);
        std::push_heap(c.begin(), c.end(), ranks_before);
      } else if (ranks_before(t, c.front())) {
        std::pop_heap(c.begin(), c.end(), ranks_before);
        c.back() = t;
        std::push_heap(c.begin(), c.end(), ranks_before);
      }
    }
  });
  std::vector<double> total(static_cast<size_t>(n), 0.0);  // the survivors' mass, relative to the row max
  if (truncate && k == 0) {
    // Pass 2 (top-p alone): tokens with p < δ = (1 − top_p)/V hold less than 1 − top_p together, so the
    // tokens with p >= δ (a best-ranked prefix) reach top_p and contain the nucleus; e^-1 of margin for f32.
    const float log_delta = std::log((1.f - pr.top_p) / static_cast<float>(v)) - 1.f;
    chunked_head_forward(hd, [&](int64_t i, int64_t v0, int64_t vc, const float* z) {
      if (tg[i] == ignore) return;
      const float m = run_max[i], floor = m + std::log(run_sum[i]) + log_delta;
      double sum = 0;
      for (int64_t j = 0; j < vc; ++j) {
        const float x = z[j] / temp;
        sum += static_cast<double>(std::exp(x - m));
        if (x >= floor) cand[static_cast<size_t>(i)].push_back({x, static_cast<int32_t>(v0 + j)});
      }
      total[static_cast<size_t>(i)] += sum;
    });
  }
  kept.assign(static_cast<size_t>(n), KeptSet{});
  parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (tg[i] == ignore) {
        lp[i] = lsep[i] = 0.f;
        if (hp) hp[i] = 0.f;
        continue;
      }
      if (!truncate) {  // temperature only: the full row's sums
        lsep[i] = run_max[i] + std::log(run_sum[i]);
        lp[i] = target[i] - lsep[i];
        if (hp) hp[i] = std::log(run_sum[i]) - shifted[i] / run_sum[i];
        continue;
      }
      std::vector<RankedToken>& c = cand[static_cast<size_t>(i)];
      std::sort(c.begin(), c.end(), ranks_before);
      const float m = c.front().z;  // the row max
      if (k > 0)
        for (const RankedToken& t : c) total[static_cast<size_t>(i)] += static_cast<double>(std::exp(t.z - m));
      size_t cut = c.size();
      if (pr.top_p < 1.f) {  // the sampler's nucleus: the smallest best-ranked prefix reaching top_p of the mass
        const double want = static_cast<double>(pr.top_p) * total[static_cast<size_t>(i)];
        double above = 0;
        for (cut = 0; cut < c.size();) {
          above += static_cast<double>(std::exp(c[cut++].z - m));
          if (above >= want) break;
        }
      }
      KeptSet& ks = kept[static_cast<size_t>(i)];
      ks.last = c[cut - 1];
      float tz = target[i];
      if (!ks.contains(tz, tg[i])) {
        ks.extra = tg[i];
        // c[cut] is outside the kept set (and the target may not be among the candidates at all).
        if (cut < c.size())
          c[cut] = {tz, tg[i]};
        else
          c.push_back({tz, tg[i]});
        ++cut;
      }
      float mk = -std::numeric_limits<float>::infinity(), sk = 0.f, shk = 0.f;
      for (size_t j = 0; j < cut; ++j) online_update(c[j].z, &mk, &sk, &shk);
      lsep[i] = mk + std::log(sk);
      lp[i] = tz - lsep[i];
      if (hp) hp[i] = std::log(sk) - shk / sk;
    }
  });
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

  const LogprobProcessing& pr = opt.processing;
  LATHE_CHECK_ARG(pr.temperature > 0.f && std::isfinite(pr.temperature), "[", op, "] temperature must be > 0, got ",
                  pr.temperature);
  LATHE_CHECK_ARG(pr.top_k >= 0, "[", op, "] top_k must be >= 0 (0: off), got ", pr.top_k);
  LATHE_CHECK_ARG(pr.top_p > 0.f && pr.top_p <= 1.f, "[", op, "] top_p must be in (0, 1], got ", pr.top_p);
  const bool processed = !pr.is_identity(v), truncated = pr.truncates(v);
  Tensor out = ent ? Tensor::empty({2, n}) : Tensor::empty({n});  // row 0 log-probs, row 1 entropy
  Tensor lse = Tensor::empty({n});                                 // [N], kept for backward
  float *lp = out.data<float>(), *hp = ent ? lp + n : nullptr, *lsep = lse.data<float>();
  auto kept = std::make_shared<std::vector<KeptSet>>();  // [N] the processed rows' kept sets, for backward
  if (processed) {
    processed_forward(hd, tg, ignore, pr, lp, hp, lsep, *kept);
  } else {
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
    for (int64_t i = 0; i < n; ++i) {
      const bool counted = tg[i] != ignore;
      lsep[i] = counted ? run_max[i] + std::log(run_sum[i]) : 0.f;
      lp[i] = counted ? target[i] - lsep[i] : 0.f;
      if (ent) hp[i] = counted ? std::log(run_sum[i]) - shifted[i] / run_sum[i] : 0.f;
    }
  }

  if (grad) {
    const bool want_h = hidden_in.requires_grad(), want_w = weight_in.requires_grad();
    check_chunked_head_weight_grad(op, weight_in);
    const Tensor ts = targets.detach(), saved = out.detach();
    const float inv_cap = hd.cap > 0.f ? 1.f / hd.cap : 0.f, temp = pr.temperature;
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
        if (processed && truncated)
          processed_row_backward(z, v0, vc, lsp[i], ent ? hs[i] - lsp[i] : 0.f, gl[i], ent ? gh[i] : 0.f, col,
                                 inv_cap, temp, (*kept)[static_cast<size_t>(i)]);
        else  // the model's distribution, or at a temperature alone (no kept set to test)
          logprob_row_backward(z, vc, lsp[i], ent ? hs[i] - lsp[i] : 0.f, gl[i], ent ? gh[i] : 0.f, col, inv_cap,
                               1.f / temp);
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
