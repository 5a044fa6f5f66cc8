// add / mul / scale fronts and kernels: validate, size the output, stream contiguous memory (vectorised
// by the compiler), record the gradient rule.
#include "lathe/ops/elementwise.h"

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {
namespace {

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  LATHE_CHECK_ARG(a.defined() && b.defined(), "[", op, "] undefined input");
  LATHE_CHECK_ARG(a.dtype() == DType::kF32 && b.dtype() == DType::kF32, "[", op, "] inputs must be f32, got ",
                  dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  LATHE_CHECK_ARG(a.shape() == b.shape(), "[", op, "] shapes must match, got ", shape_str(a.shape()), " and ",
                  shape_str(b.shape()));
}

// y[i] = f(a[i], b[i]) over n contiguous elements, split across workers when large.
template <class F>
void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  parallel_rows(n, 1, [&](int64_t, int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) y[i] = f(a[i], b[i]);
  });
}

Tensor mul_kernel(const Tensor& a, const Tensor& b) {  // both contiguous f32, same shape
  Tensor y = Tensor::empty(a.shape());
  map2(a.data<float>(), b.data<float>(), y.data<float>(), a.numel(), [](float u, float v) { return u * v; });
  return y;
}

Tensor scale_kernel(const Tensor& x, float s) {  // contiguous f32
  Tensor y = Tensor::empty(x.shape());
  const float* xp = x.data<float>();
  map2(xp, xp, y.data<float>(), x.numel(), [s](float u, float) { return u * s; });
  return y;
}

}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  check_pair("add", a_in, b_in);
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor y = Tensor::empty(a.shape());
  map2(a.data<float>(), b.data<float>(), y.data<float>(), a.numel(), [](float u, float v) { return u + v; });
  if (needs_grad({&a_in, &b_in})) {
    // Gradient: da = g, db = g (the engine copies before accumulating into a shared tensor).
    record(y, "add", {a_in, b_in}, [](const Tensor& g) -> std::vector<Tensor> { return {g, g}; });
  }
  return y;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  check_pair("mul", a_in, b_in);
  const Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor y = mul_kernel(a, b);
  if (needs_grad({&a_in, &b_in})) {
    const bool want_a = a_in.requires_grad(), want_b = b_in.requires_grad();
    // Each gradient needs the other factor only: keep just what is used.
    Tensor as = want_b ? a.detach() : Tensor(), bs = want_a ? b.detach() : Tensor();
    record(y, "mul", {a_in, b_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      // Gradient: da = g ⊙ b, db = g ⊙ a.
      return {want_a ? mul_kernel(g, bs) : Tensor(), want_b ? mul_kernel(g, as) : Tensor()};
    });
  }
  return y;
}

Tensor scale(const Tensor& x_in, float s) {
  LATHE_CHECK_ARG(x_in.defined() && x_in.dtype() == DType::kF32, "[scale] input must be f32");
  const Tensor x = x_in.contiguous();
  Tensor y = scale_kernel(x, s);
  if (needs_grad({&x_in})) {
    // Gradient: dx = g · s.
    record(y, "scale", {x_in}, [s](const Tensor& g) -> std::vector<Tensor> {
      return {scale_kernel(g.contiguous(), s)};
    });
  }
  return y;
}

}  // namespace lathe
