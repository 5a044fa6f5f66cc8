// softcap front, vectorised kernel and gradient rule.
#include "lathe/ops/softcap.h"

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/vec_math.h"

namespace lathe {

void softcap_forward(const float* x, float* y, int64_t n, float cap) {
  // x / cap (a division, not · (1/cap)), tanh, · cap: HF Gemma2's three steps, same roundings.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = vec::tanh(x[i] / cap) * cap;
}

Tensor softcap(const Tensor& x_in, float cap) {
  LATHE_CHECK_ARG(x_in.defined() && x_in.dtype() == DType::kF32, "[softcap] input must be f32");
  LATHE_CHECK_ARG(cap > 0.f, "[softcap] cap must be > 0, got ", cap);
  const Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape());
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_rows(x.numel(), 1, [&](int64_t, int64_t begin, int64_t end) {
    softcap_forward(xp + begin, yp + begin, end - begin, cap);
  });
  if (needs_grad({&x_in})) {
    // Saves the output: tanh' = 1 − tanh², and tanh = y / cap, so no tanh is recomputed.
    Tensor ys = y.detach();
    record(y, "softcap", {x_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(ys.shape());
      const float *gp = g.data<float>(), *yq = ys.data<float>();
      float* d = dx.data<float>();
      const float inv_cap = 1.f / cap;
      parallel_rows(ys.numel(), 1, [&](int64_t, int64_t begin, int64_t end) {
#pragma omp simd
        for (int64_t i = begin; i < end; ++i) {
          const float t = yq[i] * inv_cap;
          d[i] = gp[i] * (1.f - t * t);
        }
      });
      return {dx};
    });
  }
  return y;
}

}  // namespace lathe
