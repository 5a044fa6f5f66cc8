// embedding front, gather kernel and scatter-add gradient rule.
#include "lathe/ops/embedding.h"

#include <algorithm>
#include <cstring>

#include "lathe/autograd/node.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {
namespace {

inline float widen(bf16 v) { return bf16_to_f32(v); }
inline float widen(f16 v) { return f16_to_f32(v); }

// out[i, :] = weight[ids[i], :] widened to f32, for a contiguous 16-bit weight [V, C] and out [N, C].
template <class T>
void gather_rows_widened(const T* w, const int32_t* ids, int64_t n, int64_t c, float* out) {
  parallel_rows(n, c, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* src = w + ids[i] * c;
      float* dst = out + i * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dst[j] = widen(src[j]);
    }
  });
}

// out[i, :] = weight[ids[i], :] for contiguous weight [V, C] (f32, bf16 or f16) and out [N, C].
void gather_rows(const Tensor& weight, const int32_t* ids, int64_t n, int64_t c, float* out) {
  if (weight.dtype() == DType::kBF16) return gather_rows_widened(weight.data<bf16>(), ids, n, c, out);
  if (weight.dtype() == DType::kF16) return gather_rows_widened(weight.data<f16>(), ids, n, c, out);
  const float* w = weight.data<float>();
  parallel_rows(n, c, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memcpy(out + i * c, w + ids[i] * c, c * sizeof(float));
  });
}

// dweight [V, C] = Σ_i onehot(ids[i]) ⊗ g[i, :].  Each task owns a slice of the vocabulary and scans all
// ids, so no two threads write one row and the summation order (ascending i) does not depend on the
// thread count: the result is deterministic.
Tensor scatter_add_rows(const Tensor& g, const int32_t* ids, int64_t n, int64_t v, int64_t c) {
  Tensor dw = Tensor::zeros({v, c});
  float* d = dw.data<float>();
  const float* gp = g.data<float>();
  parallel_rows(v, n * c / std::max<int64_t>(v, 1) + 1, [&](int64_t, int64_t v_begin, int64_t v_end) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t row = ids[i];
      if (row < v_begin || row >= v_end) continue;
      float* dst = d + row * c;
      const float* src = gp + i * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dst[j] += src[j];
    }
  });
  return dw;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids_in) {
  LATHE_CHECK_ARG(weight.defined() && weight.dim() == 2 &&
                      (weight.dtype() == DType::kF32 || weight.dtype() == DType::kBF16 ||
                       weight.dtype() == DType::kF16),
                  "[embedding] weight must be [V, C] f32, bf16 or f16, got ",
                  weight.defined() ? shape_str(weight.shape()) : "undefined", " ",
                  weight.defined() ? dtype_name(weight.dtype()) : "");
  LATHE_CHECK_ARG(ids_in.defined() && ids_in.dtype() == DType::kI32, "[embedding] ids must be i32");
  const Tensor ids = ids_in.contiguous();
  const Tensor w = weight.contiguous();
  const int64_t v = w.size(0), c = w.size(1), n = ids.numel();
  const int32_t* idp = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(idp[i] >= 0 && idp[i] < v, "[embedding] id ", idp[i], " at position ", i,
                    " is out of range for a vocabulary of ", v);
  Shape out_shape = ids.shape();
  out_shape.push_back(c);
  Tensor out = Tensor::empty(out_shape);
  gather_rows(w, idp, n, c, out.data<float>());

  if (needs_grad({&weight})) {
    LATHE_CHECK_ARG(weight.dtype() == DType::kF32, "[embedding] gradients need an f32 weight (bf16 and f16 are "
                    "inference-only), got ", dtype_name(weight.dtype()));
    Tensor ids_saved = ids.detach();
    record(out, "embedding", {weight}, [=](const Tensor& g) -> std::vector<Tensor> {
      return {scatter_add_rows(g.contiguous(), ids_saved.data<int32_t>(), n, v, c)};
    });
  }
  return out;
}

}  // namespace lathe
