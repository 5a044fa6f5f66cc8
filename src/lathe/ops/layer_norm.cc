// layer_norm front, row kernel and gradient rule.
// Gradient: x̂ = (x − μ)·rstd, gw = g ⊙ w; dx = rstd·(gw − mean(gw) − x̂·mean(gw ⊙ x̂));
// dw = Σ_rows g ⊙ x̂; db = Σ_rows g.
#include "lathe/ops/layer_norm.h"

#include <cmath>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {
namespace {

// y [n, c] = (x − μ)·rstd·w + b per row (b null: no bias); mean, rstd [n] written when not null.
// Two passes in f32 (mean, then Σ(x − μ)²): no cancellation when |μ| ≫ σ.
void layer_norm_forward(const float* x, const float* w, const float* b, int64_t n, int64_t c, float eps, float* y,
                        float* mean_out, float* rstd_out) {
  parallel_rows(n, c, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* xr = x + i * c;
      float* yr = y + i * c;
      float s = 0.f;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < c; ++j) s += xr[j];
      const float mu = s / static_cast<float>(c);
      float ss = 0.f;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < c; ++j) ss += (xr[j] - mu) * (xr[j] - mu);
      const float r = 1.f / std::sqrt(ss / static_cast<float>(c) + eps);
      if (mean_out) {
        mean_out[i] = mu;
        rstd_out[i] = r;
      }
      if (b) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - mu) * r * w[j] + b[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] - mu) * r * w[j];
      }
    }
  });
}

// dx [n, c] (null: not wanted), dw, db [c] (null: not wanted), all written, from g [n, c].
void layer_norm_backward(const float* g, const float* x, const float* w, const float* mean, const float* rstd,
                         int64_t n, int64_t c, float* dx, float* dw, float* db) {
  const int64_t n_tasks = parallel_rows_tasks(n, c);
  // Per-task partial sums of g ⊙ x̂ and g, reduced in task order afterwards (deterministic).
  std::vector<float> dw_part(dw ? n_tasks * c : 0, 0.f), db_part(db ? n_tasks * c : 0, 0.f);
  parallel_rows(n, c, [&](int64_t task, int64_t begin, int64_t end) {
    float* dwp = dw ? dw_part.data() + task * c : nullptr;
    float* dbp = db ? db_part.data() + task * c : nullptr;
    for (int64_t i = begin; i < end; ++i) {
      const float *gr = g + i * c, *xr = x + i * c;
      const float mu = mean[i], r = rstd[i];
      if (dx) {
        float sum_gw = 0.f, dot = 0.f;  // Σ gw, Σ gw ⊙ x̂
#pragma omp simd reduction(+ : sum_gw, dot)
        for (int64_t j = 0; j < c; ++j) {
          const float gw = gr[j] * w[j];
          sum_gw += gw;
          dot += gw * (xr[j] - mu) * r;
        }
        const float mean_gw = sum_gw / static_cast<float>(c), mean_dot = dot / static_cast<float>(c);
        float* dxr = dx + i * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dxr[j] = r * (gr[j] * w[j] - mean_gw - (xr[j] - mu) * r * mean_dot);
      }
      if (dwp) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dwp[j] += gr[j] * ((xr[j] - mu) * r);
      }
      if (dbp) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dbp[j] += gr[j];
      }
    }
  });
  auto reduce = [&](const std::vector<float>& part, float* out) {
    for (int64_t j = 0; j < c; ++j) out[j] = 0.f;
    for (int64_t t = 0; t < n_tasks; ++t)
      for (int64_t j = 0; j < c; ++j) out[j] += part[t * c + j];
  };
  if (dw) reduce(dw_part, dw);
  if (db) reduce(db_part, db);
}

bool is_norm_param(const Tensor& t, int64_t c) {
  return t.dim() == 1 && t.size(0) == c && (t.dtype() == DType::kF32 || t.dtype() == DType::kBF16);
}

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& w, const Tensor& b, float eps) {
  LATHE_CHECK_ARG(x_in.defined() && x_in.dtype() == DType::kF32 && x_in.dim() >= 1,
                  "[layer_norm] input must be f32 [..., C]");
  const int64_t c = x_in.size(-1);
  LATHE_CHECK_ARG(w.defined() && is_norm_param(w, c), "[layer_norm] weight must be f32 or bf16 [", c, "], got ",
                  w.defined() ? shape_str(w.shape()) : "undefined");
  LATHE_CHECK_ARG(!b.defined() || is_norm_param(b, c), "[layer_norm] bias must be f32 or bf16 [", c, "], got ",
                  b.defined() ? shape_str(b.shape()) : "");
  LATHE_CHECK_ARG(eps >= 0.f, "[layer_norm] eps must be >= 0, got ", eps);
  const Tensor x = x_in.contiguous();
  const int64_t n = c ? x.numel() / c : 0;
  const std::vector<float> wf = w.to_vector(), bf = b.defined() ? b.to_vector() : std::vector<float>();
  Tensor y = Tensor::empty(x.shape());
  const bool grad = needs_grad({&x_in, &w, &b});
  Tensor stats = grad ? Tensor::empty({2, n}) : Tensor();  // [2, N]: mean and rstd per row
  float* mean = grad ? stats.data<float>() : nullptr;
  layer_norm_forward(x.data<float>(), wf.data(), b.defined() ? bf.data() : nullptr, n, c, eps, y.data<float>(),
                     mean, grad ? mean + n : nullptr);

  if (grad) {
    const bool want_x = x_in.requires_grad(), want_w = w.requires_grad(), want_b = b.defined() && b.requires_grad();
    LATHE_CHECK_ARG((!want_w || w.dtype() == DType::kF32) && (!want_b || b.dtype() == DType::kF32),
                    "[layer_norm] gradients need f32 parameters (bf16 is inference-only)");
    Tensor xs = x.detach();
    record(y, "layer_norm", {x_in, w, b}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = want_x ? Tensor::empty(xs.shape()) : Tensor();
      Tensor dw = want_w ? Tensor::empty({c}) : Tensor(), db = want_b ? Tensor::empty({c}) : Tensor();
      const float* st = stats.data<float>();
      layer_norm_backward(g.data<float>(), xs.data<float>(), wf.data(), st, st + n, n, c,
                          want_x ? dx.data<float>() : nullptr, want_w ? dw.data<float>() : nullptr,
                          want_b ? db.data<float>() : nullptr);
      return {dx, dw, db};
    });
  }
  return y;
}

}  // namespace lathe
