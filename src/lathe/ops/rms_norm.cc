// rms_norm front, row kernel and gradient rule.
// Gradient: x̂ = x·rstd, gw = g ⊙ (offset + w); dx = rstd·(gw − x̂·mean(gw ⊙ x̂)); dw = Σ_rows g ⊙ x̂.
#include "lathe/ops/rms_norm.h"

#include <cmath>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {
namespace {

// weight_offset + w as f32 [C] (converts bf16 once per call; C is small next to N·C).
std::vector<float> effective_weight(const Tensor& w, float weight_offset) {
  std::vector<float> wf = w.to_vector();
  for (float& v : wf) v = weight_offset + v;
  return wf;
}

// y [n, c] = x · rstd · wf per row; rstd [n] written when not null.
void rms_norm_forward(const float* x, const float* wf, int64_t n, int64_t c, float eps, float* y, float* rstd) {
  parallel_rows(n, c, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* xr = x + i * c;
      float* yr = y + i * c;
      float ss = 0.f;
#pragma omp simd reduction(+ : ss)
      for (int64_t j = 0; j < c; ++j) ss += xr[j] * xr[j];
      // As HF: rsqrt(mean + eps), then (x · rstd) rounded before the weight multiply.
      const float r = 1.f / std::sqrt(ss / static_cast<float>(c) + eps);
      if (rstd) rstd[i] = r;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) yr[j] = (xr[j] * r) * wf[j];
    }
  });
}

// dx [n, c] (written) and dw [c] (written; null: not wanted) from g [n, c].
void rms_norm_backward(const float* g, const float* x, const float* wf, const float* rstd, int64_t n, int64_t c,
                       float* dx, float* dw) {
  const int64_t n_tasks = parallel_rows_tasks(n, c);
  std::vector<float> dw_part(dw ? n_tasks * c : 0, 0.f);  // per-task partial Σ g ⊙ x̂, summed in task order
  parallel_rows(n, c, [&](int64_t task, int64_t begin, int64_t end) {
    float* dwp = dw ? dw_part.data() + task * c : nullptr;
    for (int64_t i = begin; i < end; ++i) {
      const float *gr = g + i * c, *xr = x + i * c;
      const float r = rstd[i];
      float dot = 0.f;  // Σ_j gw_j · x̂_j
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < c; ++j) dot += gr[j] * wf[j] * xr[j];
      dot *= r;
      if (dx) {
        const float k = r * r * dot / static_cast<float>(c);  // rstd · mean(gw ⊙ x̂) / x-scale
        float* dxr = dx + i * c;
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dxr[j] = r * gr[j] * wf[j] - k * xr[j];
      }
      if (dwp) {
#pragma omp simd
        for (int64_t j = 0; j < c; ++j) dwp[j] += gr[j] * (xr[j] * r);
      }
    }
  });
  if (!dw) return;
  for (int64_t j = 0; j < c; ++j) dw[j] = 0.f;
  for (int64_t t = 0; t < n_tasks; ++t) {
    const float* p = dw_part.data() + t * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dw[j] += p[j];
  }
}

}  // namespace

Tensor rms_norm(const Tensor& x_in, const Tensor& w, float eps, float weight_offset) {
  LATHE_CHECK_ARG(x_in.defined() && x_in.dtype() == DType::kF32 && x_in.dim() >= 1,
                  "[rms_norm] input must be f32 [..., C]");
  LATHE_CHECK_ARG(w.defined() && w.dim() == 1 && w.size(0) == x_in.size(-1) &&
                      (w.dtype() == DType::kF32 || w.dtype() == DType::kBF16),
                  "[rms_norm] weight must be f32 or bf16 [", x_in.size(-1), "], got ",
                  w.defined() ? shape_str(w.shape()) : "undefined");
  LATHE_CHECK_ARG(eps >= 0.f, "[rms_norm] eps must be >= 0, got ", eps);
  const Tensor x = x_in.contiguous();
  const int64_t c = x.size(-1), n = c ? x.numel() / c : 0;
  const std::vector<float> wf = effective_weight(w, weight_offset);
  Tensor y = Tensor::empty(x.shape());
  const bool grad = needs_grad({&x_in, &w});
  Tensor rstd = grad ? Tensor::empty({n}) : Tensor();  // [N]: all the backward keeps besides x and w
  rms_norm_forward(x.data<float>(), wf.data(), n, c, eps, y.data<float>(), grad ? rstd.data<float>() : nullptr);

  if (grad) {
    const bool want_x = x_in.requires_grad(), want_w = w.requires_grad();
    LATHE_CHECK_ARG(!want_w || w.dtype() == DType::kF32, "[rms_norm] gradients need an f32 weight (bf16 is inference-only)");
    Tensor xs = x.detach();
    record(y, "rms_norm", {x_in, w}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = want_x ? Tensor::empty(xs.shape()) : Tensor(), dw = want_w ? Tensor::empty({c}) : Tensor();
      rms_norm_backward(g.data<float>(), xs.data<float>(), wf.data(), rstd.data<float>(), n, c,
                        want_x ? dx.data<float>() : nullptr, want_w ? dw.data<float>() : nullptr);
      return {dx, dw};
    });
  }
  return y;
}

}  // namespace lathe
