#include "lathe/posttrain/distill_loss.h"

#include <algorithm>
#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/ops/elementwise.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe::posttrain {

namespace {

// log_softmax(x) of a row, in double (V terms: f32 sums lose the small probabilities' share).
void log_softmax_row(const double* x, int64_t v, double* out) {
  double m = -INFINITY;
  for (int64_t j = 0; j < v; ++j) m = std::max(m, x[j]);
  double s = 0;
  for (int64_t j = 0; j < v; ++j) s += std::exp(x[j] - m);
  const double lse = m + std::log(s);
  for (int64_t j = 0; j < v; ++j) out[j] = x[j] - lse;
}

}  // namespace

double distill_row(const float* zs, const float* zt, int64_t v, const DistillLossOptions& o, float* dzs,
                   double* kl_forward) {
  const double T = o.temperature, cap = o.final_softcap;
  // s = z_S / T (after the soft-cap), t = z_T / T; lq = log q, lp = log p.
  std::vector<double> buf(static_cast<size_t>(4 * v));
  double *s = buf.data(), *t = s + v, *lq = t + v, *lp = lq + v;
  for (int64_t j = 0; j < v; ++j) {
    const double z = cap > 0 ? cap * std::tanh(zs[j] / cap) : zs[j];
    s[j] = z / T;
    t[j] = zt[j] / T;
  }
  log_softmax_row(s, v, lq);
  log_softmax_row(t, v, lp);
  double fkl = 0;
  for (int64_t j = 0; j < v; ++j) fkl += std::exp(lp[j]) * (lp[j] - lq[j]);
  if (kl_forward) *kl_forward = fkl;
  Divergence kind = o.divergence;
  if (kind == Divergence::kJsd && o.beta == 0) kind = Divergence::kForwardKl;  // TRL's special cases
  if (kind == Divergence::kJsd && o.beta == 1) kind = Divergence::kReverseKl;
  // d[j] = dD/ds_j; the JSD and reverse KL as q_j·(a_j − Σ_k q_k a_k) through the softmax.
  double d_value = 0;
  double* d = s;  // s is not needed past here: reuse it for dD/ds
  if (kind == Divergence::kForwardKl) {
    d_value = fkl;
    for (int64_t j = 0; j < v; ++j) d[j] = std::exp(lq[j]) - std::exp(lp[j]);
  } else if (kind == Divergence::kReverseKl) {
    for (int64_t j = 0; j < v; ++j) d_value += std::exp(lq[j]) * (lq[j] - lp[j]);
    for (int64_t j = 0; j < v; ++j) d[j] = std::exp(lq[j]) * (lq[j] - lp[j] - d_value);
  } else {
    // m = β p + (1−β) q; D = β KL(p‖m) + (1−β) KL(q‖m); dD/dq_j = (1−β)(log q_j − log m_j).
    const double b = o.beta;
    double qa = 0;
    for (int64_t j = 0; j < v; ++j) {
      const double p = std::exp(lp[j]), q = std::exp(lq[j]);
      const double lm = std::log(b * p + (1 - b) * q);
      d_value += b * p * (lp[j] - lm) + (1 - b) * q * (lq[j] - lm);
      d[j] = (1 - b) * (lq[j] - lm);  // a_j
      qa += q * d[j];
    }
    for (int64_t j = 0; j < v; ++j) d[j] = std::exp(lq[j]) * (d[j] - qa);
  }
  if (dzs) {
    for (int64_t j = 0; j < v; ++j) {
      double g = d[j] / T;
      if (cap > 0) {
        const double c = std::tanh(zs[j] / cap);
        g *= 1 - c * c;
      }
      dzs[j] = static_cast<float>(g);
    }
  }
  return d_value;
}

double distill_row_top_k(const float* zs, int64_t v, const int32_t* ids, const float* zt, int64_t k,
                         const DistillLossOptions& o, float* dzs, double* kl_forward) {
  // Renormalising over S is the full-vocabulary formula on the gathered logits (the soft-cap is per logit).
  std::vector<float> zk(static_cast<size_t>(k)), gk(dzs ? static_cast<size_t>(k) : 0);
  for (int64_t j = 0; j < k; ++j) zk[j] = zs[ids[j]];
  const double d = distill_row(zk.data(), zt, k, o, dzs ? gk.data() : nullptr, kl_forward);
  if (dzs) {
    std::fill(dzs, dzs + v, 0.f);
    for (int64_t j = 0; j < k; ++j) dzs[ids[j]] = gk[j];
  }
  return d;
}

void teacher_top_k(const float* z, int64_t v, int64_t k, int32_t* ids, float* top) {
  LATHE_CHECK_ARG(k >= 1 && k <= v, "[teacher_top_k] k = ", k, " outside [1, ", v, "]");
  auto key = [z](int32_t i) { return std::isnan(z[i]) ? -INFINITY : z[i]; };  // a strict weak order
  std::vector<int32_t> idx(static_cast<size_t>(v));
  for (int64_t j = 0; j < v; ++j) idx[j] = static_cast<int32_t>(j);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  });
  for (int64_t j = 0; j < k; ++j) {
    ids[j] = idx[j];
    top[j] = z[idx[j]];
  }
}

Tensor linear_distill_loss(const Tensor& hidden_in, const Tensor& weight, const TeacherLogitsFn& teacher,
                           const std::vector<int32_t>& targets, const std::vector<double>& row_weights,
                           const DistillLossOptions& o, DistillSums* sums) {
  LATHE_CHECK_ARG(hidden_in.dim() == 2 && weight.dim() == 2 && hidden_in.size(1) == weight.size(1),
                  "[linear_distill_loss] hidden [N, C] and weight [V, C] expected, got ", shape_str(hidden_in.shape()),
                  " and ", shape_str(weight.shape()));
  LATHE_CHECK_ARG(weight.dtype() == DType::kF32, "[linear_distill_loss] the student head must be f32");
  const int64_t n = hidden_in.size(0), c = hidden_in.size(1), V = weight.size(0);
  LATHE_CHECK_ARG(static_cast<int64_t>(row_weights.size()) == n && static_cast<int64_t>(targets.size()) == n,
                  "[linear_distill_loss] ", n, " rows but ", row_weights.size(), " weights and ", targets.size(),
                  " targets");
  LATHE_CHECK_ARG(o.temperature > 0 && o.chunk_rows >= 1 && o.beta >= 0 && o.beta <= 1 && o.alpha >= 0 &&
                      o.alpha <= 1,
                  "[linear_distill_loss] temperature > 0, chunk_rows >= 1, beta and alpha in [0, 1] expected");
  const int64_t top_k = o.top_k;
  LATHE_CHECK_ARG(top_k >= 0 && top_k <= V, "[linear_distill_loss] top_k ", top_k, " outside [0, ", V, "]");
  const Tensor hidden = hidden_in.to(DType::kF32).contiguous();
  const bool want_grad = needs_grad({&hidden_in, &weight});
  const bool want_w = want_grad && weight.requires_grad();  // a LoRA run's frozen head takes none
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(targets[i] < V, "[linear_distill_loss] target ", targets[i], " (row ", i,
                    ") outside the vocabulary [0, ", V, ")");
  const double kd_scale = o.alpha * (o.temperature_squared ? o.temperature * o.temperature : 1.0);
  const double nll_scale = 1 - o.alpha;
  Tensor dh, dw;  // [N, C], [V, C]: the loss's gradients, filled chunk by chunk
  if (want_grad) {
    dh = Tensor::zeros({n, c});
    if (want_w) dw = Tensor::zeros({V, c});
  }
  std::vector<double> row_d(static_cast<size_t>(n), 0), row_kl(static_cast<size_t>(n), 0),
      row_nll(static_cast<size_t>(n), 0);
  {  // the chunks' own ops record nothing: the gradient is this function's
  NoGradGuard no_grad;
  for (int64_t r0 = 0; r0 < n; r0 += o.chunk_rows) {
    const int64_t r = std::min(o.chunk_rows, n - r0);
    bool any = false;
    for (int64_t i = r0; i < r0 + r; ++i) any = any || row_weights[i] != 0;
    if (!any) continue;
    const Tensor h = hidden.slice(0, r0, r0 + r).contiguous();  // [r, C]
    const Tensor zs = linear(h, weight);                        // [r, V]
    const TeacherRows t = teacher(r0, r);
    const Tensor zt = t.logits.to(DType::kF32).contiguous();  // [r, V], or [r, top_k] with ids
    const bool cached = t.ids.defined();                       // the teacher's top-k, given
    const int64_t zt_cols = cached ? top_k : V;
    LATHE_CHECK_ARG(top_k > 0 || !cached, "[linear_distill_loss] teacher top-k ids for a full-vocabulary loss");
    LATHE_CHECK_ARG(zt.dim() == 2 && zt.size(0) == r && zt.size(1) == zt_cols, "[linear_distill_loss] teacher logits ",
                    shape_str(zt.shape()), " for ", r, " rows, ", zt_cols, " expected per row");
    Tensor tid;  // [r, top_k] i32 when cached
    if (cached) {
      tid = t.ids.contiguous();
      LATHE_CHECK_ARG(tid.dtype() == DType::kI32 && tid.shape() == zt.shape(), "[linear_distill_loss] teacher ids ",
                      shape_str(tid.shape()), " i32 expected, as the logits ", shape_str(zt.shape()));
      const int32_t* p = tid.data<int32_t>();
      for (int64_t k = 0; k < r; ++k)
        if (row_weights[static_cast<size_t>(r0 + k)] != 0)
          for (int64_t j = 0; j < top_k; ++j)
            LATHE_CHECK_ARG(p[k * top_k + j] >= 0 && p[k * top_k + j] < V, "[linear_distill_loss] teacher id ",
                            p[k * top_k + j], " (row ", r0 + k, ") outside the vocabulary [0, ", V, ")");
    }
    const int32_t* tidp = cached ? tid.data<int32_t>() : nullptr;
    Tensor dz = want_grad ? Tensor::zeros({r, V}) : Tensor();  // [r, V] d(loss)/d(zs)
    const float* zsp = zs.data<float>();
    const float* ztp = zt.data<float>();
    float* dzp = want_grad ? dz.data<float>() : nullptr;
    parallel_rows(r, 4 * V, [&](int64_t, int64_t b, int64_t e) {
      std::vector<float> g(static_cast<size_t>(V));
      std::vector<int32_t> sel_ids(static_cast<size_t>(cached ? 0 : top_k));  // [top_k] selected here
      std::vector<float> sel_z(sel_ids.size());
      for (int64_t k = b; k < e; ++k) {
        const int64_t i = r0 + k;
        const double w = row_weights[static_cast<size_t>(i)];
        if (w == 0) continue;
        const float* z = zsp + k * V;
        float* gp = want_grad ? g.data() : nullptr;
        if (top_k == 0) {
          row_d[i] = distill_row(z, ztp + k * V, V, o, gp, &row_kl[i]);
        } else if (cached) {
          row_d[i] = distill_row_top_k(z, V, tidp + k * top_k, ztp + k * top_k, top_k, o, gp, &row_kl[i]);
        } else {
          teacher_top_k(ztp + k * V, V, top_k, sel_ids.data(), sel_z.data());
          row_d[i] = distill_row_top_k(z, V, sel_ids.data(), sel_z.data(), top_k, o, gp, &row_kl[i]);
        }
        float* dr = want_grad ? dzp + k * V : nullptr;
        if (dr)
          for (int64_t j = 0; j < V; ++j) dr[j] = static_cast<float>(w * kd_scale * g[j]);
        const int32_t y = targets[static_cast<size_t>(i)];
        if (y >= 0) {  // hard-label CE at temperature 1, on the (capped) logits (a metric when α = 1)
          std::vector<double> x(static_cast<size_t>(V)), lx(static_cast<size_t>(V));
          for (int64_t j = 0; j < V; ++j)
            x[j] = o.final_softcap > 0 ? o.final_softcap * std::tanh(z[j] / o.final_softcap) : z[j];
          log_softmax_row(x.data(), V, lx.data());
          row_nll[i] = -lx[y];
          if (dr && nll_scale > 0)
            for (int64_t j = 0; j < V; ++j) {
              double gj = std::exp(lx[j]) - (j == y ? 1.0 : 0.0);
              if (o.final_softcap > 0) {
                const double cc = std::tanh(z[j] / o.final_softcap);
                gj *= 1 - cc * cc;
              }
              dr[j] += static_cast<float>(w * nll_scale * gj);
            }
        }
      }
    });
    if (want_grad) {
      // dh[rows] = dz · W; dW += dzᵀ · h.
      dh.slice(0, r0, r0 + r).copy_from(matmul(dz, weight));
      if (want_w) dw = add(dw, matmul(dz.transpose(0, 1).contiguous(), h));
    }
  }
  }
  DistillSums s;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {  // in row order: the same sum for any thread count
    const double w = row_weights[static_cast<size_t>(i)];
    if (w == 0) continue;
    s.divergence += w * row_d[i];
    s.kl_forward += w * row_kl[i];
    s.nll += w * row_nll[i];
    total += w * (kd_scale * row_d[i] + nll_scale * row_nll[i]);
  }
  if (sums) *sums = s;
  Tensor out = Tensor::from_data({1}, {static_cast<float>(total)});
  if (want_grad) {
    record(out, "linear_distill_loss", {hidden_in, weight}, [dh, dw](const Tensor& g) -> std::vector<Tensor> {
      const float gs = g.item();
      return {scale(dh, gs), dw.defined() ? scale(dw, gs) : Tensor()};
    });
  }
  return out;
}

}  // namespace lathe::posttrain
