// dropout front, kernel and gradient rule (see dropout.h).
#include "lathe/ops/dropout.h"

#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/base/rng.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {
namespace {

// The kept elements' factor 1 / (1 - p), dropped ones 0: [n] f32 (also the gradient's multiplier).
Tensor dropout_mask(const Shape& shape, int64_t n, float p, uint64_t key) {
  Tensor m = Tensor::empty(shape);
  float* mp = m.data<float>();
  const float keep_scale = 1.f / (1.f - p);
  parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      mp[i] = CounterRng{key, static_cast<uint64_t>(i)}.next_float() >= p ? keep_scale : 0.f;
  });
  return m;
}

}  // namespace

Tensor dropout(const Tensor& x_in, float p, uint64_t key) {
  LATHE_CHECK_ARG(p >= 0.f && p < 1.f, "[dropout] p must be in [0, 1), got ", p);
  LATHE_CHECK_ARG(x_in.dtype() == DType::kF32 || x_in.dtype() == DType::kBF16,
                  "[dropout] input must be f32 or bf16, got ", dtype_name(x_in.dtype()));
  if (p == 0.f) return x_in;
  const Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  Tensor mask = dropout_mask(x.shape(), n, p, key);
  const float* mp = mask.data<float>();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  if (x.dtype() == DType::kF32) {
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) yp[i] = xp[i] * mp[i];
    });
  } else {
    const bf16* xp = x.data<bf16>();
    bf16* yp = y.data<bf16>();
    parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) yp[i] = f32_to_bf16(bf16_to_f32(xp[i]) * mp[i]);
    });
  }
  if (needs_grad({&x_in})) {
    // Gradient: dx = g ⊙ mask (the same factors the forward applied).
    record(y, "dropout", {x_in}, [mask](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(g.shape());
      const float* gp = g.data<float>();
      const float* mp = mask.data<float>();
      float* dp = dx.data<float>();
      for (int64_t i = 0; i < g.numel(); ++i) dp[i] = gp[i] * mp[i];
      return {dx};
    });
  }
  return y;
}

}  // namespace lathe
