// to_bf16, bf16_compute_weight and stochastic_round_bf16 (see cast.h).
#include "lathe/ops/cast.h"

#include "lathe/autograd/node.h"
#include "lathe/base/rng.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {

Tensor to_bf16(const Tensor& x_in) {
  LATHE_CHECK_ARG(x_in.dtype() == DType::kF32, "[to_bf16] input must be f32, got ", dtype_name(x_in.dtype()));
  const Tensor x = x_in.contiguous();
  Tensor y = Tensor::empty(x.shape(), DType::kBF16);
  const float* xp = x.data<float>();
  bf16* yp = y.data<bf16>();
  const int64_t n = x.numel(), row = x.dim() > 0 ? std::max<int64_t>(x.size(-1), 1) : 1;
  parallel_rows(n / row, row, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin * row; i < end * row; ++i) yp[i] = f32_to_bf16(xp[i]);
  });
  // Gradient: the identity (rounding is treated as exact). The graph keeps x_in's producer, not x_in:
  // the f32 activation is freed when the caller drops it; only this half-size copy stays for backward.
  if (needs_grad({&x_in})) record(y, "to_bf16", {x_in}, [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
  return y;
}

Tensor bf16_compute_weight(const Tensor& master, const Tensor& copy) {
  LATHE_CHECK_ARG(master.dtype() == DType::kF32 && copy.dtype() == DType::kBF16 && master.shape() == copy.shape(),
                  "[bf16_compute_weight] needs an f32 master and a bf16 copy of one shape, got ",
                  dtype_name(master.dtype()), " ", shape_str(master.shape()), " and ", dtype_name(copy.dtype()), " ",
                  shape_str(copy.shape()));
  Tensor y = copy.detach();  // a fresh handle: the node below must not land on the long-lived copy
  if (needs_grad({&master}))
    record(y, "bf16_compute_weight", {master}, [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
  return y;
}

void stochastic_round_bf16(const Tensor& src, const Tensor& dst, uint64_t key) {
  LATHE_CHECK_ARG(src.dtype() == DType::kF32 && dst.dtype() == DType::kBF16 && src.shape() == dst.shape() &&
                      src.is_contiguous() && dst.is_contiguous(),
                  "[stochastic_round_bf16] needs contiguous f32 src and bf16 dst of one shape");
  const float* s = src.data<float>();
  bf16* d = dst.data<bf16>();
  // Groups of 4 elements share one 64-bit draw (16 bits each); rows of 1024 groups for the pool.
  constexpr int64_t kGroupsPerRow = 1024;
  const int64_t n = src.numel(), groups = (n + 3) / 4, rows = (groups + kGroupsPerRow - 1) / kGroupsPerRow;
  parallel_rows(rows, 4 * kGroupsPerRow, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t g = begin * kGroupsPerRow; g < std::min(groups, end * kGroupsPerRow); ++g) {
      uint64_t bits = CounterRng{key, static_cast<uint64_t>(g)}.next_u64();  // draw g + 1 of the stream `key`
      for (int64_t i = 4 * g; i < std::min(n, 4 * g + 4); ++i, bits >>= 16)
        d[i] = f32_to_bf16_stochastic(s[i], static_cast<uint16_t>(bits));
    }
  });
}

}  // namespace lathe
