// activation front, vectorised point-wise kernels (value and derivative) and gradient rule.
#include "lathe/ops/activation.h"

#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

// Each functor gives act(x) (value) and act(x), act'(x) together (value_grad), in the operation order
// PyTorch's CPU kernels use, so forward results match torch to a few ulp.
struct SiluFn {  // x / (1 + e^−x) (torch silu); d = s·(1 + x·(1 − s)), s = sigmoid(x)
  static float value(float x) { return x / (1.f + vec::exp(-x)); }
  static void value_grad(float x, float& a, float& d) {
    const float e = vec::exp(-x), s = 1.f / (1.f + e);
    a = x / (1.f + e);
    d = s * (1.f + x * (1.f - s));
  }
};

struct GeluFn {  // x·Φ(x), Φ(x) = ½·erfc(−x/√2) (no cancellation for x ≪ 0); d = Φ(x) + x·φ(x)
  static constexpr float kSqrtHalf = 0.70710678118654752f, kInvSqrt2Pi = 0.39894228040143268f;
  static float value(float x) { return x * (0.5f * vec::erfc(-x * kSqrtHalf)); }
  static void value_grad(float x, float& a, float& d) {
    const float phi_cdf = 0.5f * vec::erfc(-x * kSqrtHalf);
    a = x * phi_cdf;
    d = phi_cdf + x * kInvSqrt2Pi * vec::exp(-0.5f * x * x);
  }
};

struct GeluTanhFn {  // ½x·(1 + tanh(β(x + κx³))), β = √(2/π); torch gelu(approximate="tanh")
  static constexpr float kBeta = 0.79788456080286536f, kKappa = 0.044715f;
  static float value(float x) { return 0.5f * x * (1.f + vec::tanh(kBeta * (x + kKappa * x * x * x))); }
  static void value_grad(float x, float& a, float& d) {
    const float t = vec::tanh(kBeta * (x + kKappa * x * x * x));
    a = 0.5f * x * (1.f + t);
    d = 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * x * x);
  }
};

template <class F, bool kMul>
void forward_loop(const float* x, const float* m, float* y, int64_t n) {
  parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      if constexpr (kMul)
        y[i] = F::value(x[i]) * m[i];
      else
        y[i] = F::value(x[i]);
    }
  });
}

template <class F, bool kMul, bool kDm>
void backward_loop(const float* x, const float* m, const float* g, float* dx, float* dm, int64_t n) {
  parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      float a, d;
      F::value_grad(x[i], a, d);
      if constexpr (kMul)
        dx[i] = g[i] * m[i] * d;
      else
        dx[i] = g[i] * d;
      if constexpr (kDm) dm[i] = g[i] * a;
    }
  });
}

template <class F>
void forward_for(const float* x, const float* m, float* y, int64_t n) {
  m ? forward_loop<F, true>(x, m, y, n) : forward_loop<F, false>(x, m, y, n);
}

template <class F>
void backward_for(const float* x, const float* m, const float* g, float* dx, float* dm, int64_t n) {
  if (!m)
    backward_loop<F, false, false>(x, m, g, dx, dm, n);
  else if (!dm)
    backward_loop<F, true, false>(x, m, g, dx, dm, n);
  else
    backward_loop<F, true, true>(x, m, g, dx, dm, n);
}

}  // namespace

Activation parse_activation(std::string_view name) {
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::kGeluTanh;
  throw InvalidArgument(str_cat("[activation] unsupported activation \"", name,
                                "\" (known: silu, swish, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)"));
}

std::string_view activation_name(Activation kind) {
  switch (kind) {
    case Activation::kSilu: return "silu";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kCount: break;
  }
  return "?";
}

void activation_forward(Activation kind, const float* x, const float* m, float* y, int64_t n) {
  switch (kind) {
    case Activation::kSilu: return forward_for<SiluFn>(x, m, y, n);
    case Activation::kGelu: return forward_for<GeluFn>(x, m, y, n);
    case Activation::kGeluTanh: return forward_for<GeluTanhFn>(x, m, y, n);
    case Activation::kCount: break;
  }
  LATHE_ASSERT(false, "bad activation kind ", static_cast<int>(kind));
}

void activation_backward(Activation kind, const float* x, const float* m, const float* g, float* dx, float* dm,
                         int64_t n) {
  switch (kind) {
    case Activation::kSilu: return backward_for<SiluFn>(x, m, g, dx, dm, n);
    case Activation::kGelu: return backward_for<GeluFn>(x, m, g, dx, dm, n);
    case Activation::kGeluTanh: return backward_for<GeluTanhFn>(x, m, g, dx, dm, n);
    case Activation::kCount: break;
  }
  LATHE_ASSERT(false, "bad activation kind ", static_cast<int>(kind));
}

Tensor activation(const Tensor& x_in, Activation kind) {
  LATHE_CHECK_ARG(x_in.defined() && x_in.dtype() == DType::kF32, "[activation] input must be f32");
  LATHE_CHECK_ARG(kind < Activation::kCount, "[activation] bad kind ", static_cast<int>(kind));
  const Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape());
  activation_forward(kind, x.data<float>(), nullptr, y.data<float>(), x.numel());
  if (needs_grad({&x_in})) {
    // Saves the input, not the output: act' needs x, and recomputing act(x) is cheaper than storing it.
    Tensor xs = x.detach();
    record(y, "activation", {x_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(xs.shape());
      activation_backward(kind, xs.data<float>(), nullptr, g.data<float>(), dx.data<float>(), nullptr, xs.numel());
      return {dx};
    });
  }
  return y;
}

}  // namespace lathe
