// The quantised GEMM dispatcher: decode rows go to the tier's GEMV with W's rows split over the workers;
// prefill without an integer-dot GEMM (nf4, the scalar tier, AVX-512 without VNNI) dequantises kPanelRows
// rows of W at a time into an f32 panel and runs the f32 GEMM on it (the panel is reused by every row of x,
// so its dequantisation costs 1/m of the products).
#include "lathe/backend/cpu/quant_gemm.h"

#include <algorithm>
#include <memory>

#include "lathe/backend/cpu/column_chunks.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"

namespace lathe::cpu {
namespace {

QuantGemvFn gemv_for(CpuTier tier, const QuantMatrix& w) {
  if (w.spec.format == QuantFormat::kNf4) {
    if (w.k % w.spec.group != 0) return quant_gemv_scalar;  // rows that do not start a block
    return tier == CpuTier::kAvx512 ? nf4_gemv_avx512 : tier == CpuTier::kAvx2 ? nf4_gemv_avx2 : quant_gemv_scalar;
  }
  switch (tier) {
    case CpuTier::kAvx512:
      return quant_gemv_avx512;
    case CpuTier::kAvx2:
      return quant_gemv_avx2;
    default:
      return quant_gemv_scalar;
  }
}

// W rows per dequantised panel: 256 rows of K = 2048 are 2 MiB of f32, the GEMM's packed B chunk comes
// from it while it is in L2/L3.
constexpr int64_t kPanelRows = 256;

void gemm_panels(CpuTier tier, int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                 bool accumulate, const ThreadPool& pool) {
  const auto dequantize = tier >= CpuTier::kAvx2 && w.spec.format != QuantFormat::kNf4 ? quant_dequantize_rows_avx2
                                                                                    : quant_dequantize_rows;
  const int64_t rows = std::min(kPanelRows, w.n);
  const std::shared_ptr<void> buf = current_context().alloc.allocate(static_cast<size_t>(rows * w.k) * sizeof(float));
  float* panel = static_cast<float*>(buf.get());
  for (int64_t j0 = 0; j0 < w.n; j0 += rows) {
    const int64_t nb = std::min(rows, w.n - j0);
    pool.parallel_for(nb, [&](int64_t r, int) { dequantize(w, j0 + r, j0 + r + 1, panel + r * w.k); });
    gemm(GemmArgs<float, float>{false, true, m, nb, w.k, x, ldx, panel, w.k, y + j0, ldy, 1.f, accumulate ? 1.f : 0.f},
         pool);
  }
}

}  // namespace

void quant_gemm_with(CpuTier tier, int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                     bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  if (m > kQuantGemvMaxM) return gemm_panels(tier, m, x, ldx, w, y, ldy, accumulate, pool);
  const QuantGemvFn fn = gemv_for(tier, w);
  for_column_chunks(w.n, w.k, pool,
                    [&](int64_t j0, int64_t j1) { fn(static_cast<int>(m), x, ldx, w, j0, j1, y, ldy, accumulate); });
}

void quant_gemm_dx(int64_t m, const float* dy, int64_t lddy, const QuantMatrix& w, float* dx, int64_t lddx,
                   bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.k <= 0) return;
  const int64_t rows = std::min(kPanelRows, w.n);
  const std::shared_ptr<void> buf = current_context().alloc.allocate(static_cast<size_t>(rows * w.k) * sizeof(float));
  float* panel = static_cast<float*>(buf.get());
  for (int64_t j0 = 0; j0 < w.n; j0 += rows) {
    const int64_t nb = std::min(rows, w.n - j0);
    pool.parallel_for(nb, [&](int64_t r, int) { quant_dequantize_rows(w, j0 + r, j0 + r + 1, panel + r * w.k); });
    // dx (+)= dy[:, j0:j0+nb] · panel [nb, k]; the first panel writes (or adds to) dx, the others add.
    const bool add = accumulate || j0 > 0;
    gemm(GemmArgs<float, float>{false, false, m, w.k, nb, dy + j0, lddy, panel, w.k, dx, lddx, 1.f, add ? 1.f : 0.f},
         pool);
  }
}

bool quant_cpu_has_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_max_tier() >= CpuTier::kAvx512 && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

void quant_gemm_vnni(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                     bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  LATHE_ASSERT(m <= kQuantGemvMaxM && quant_cpu_has_vnni(), "quant_gemm_vnni: m ", m, " or CPU without VNNI");
  QuantActivations a;
  a.m = static_cast<int>(m);
  const int64_t per_block = quant_units_per_block(w.spec.format);
  a.blocks = (w.k / kQuantUnit + per_block - 1) / per_block;
  a.block_bytes = per_block * kQuantUnit;
  a.groups = w.k / w.spec.group;
  const size_t xq_bytes = static_cast<size_t>(m * a.blocks * a.block_bytes);
  const size_t dx_bytes = static_cast<size_t>(m * a.blocks * 16) * 4;
  const std::shared_ptr<void> buf =
      current_context().alloc.allocate(xq_bytes + dx_bytes + static_cast<size_t>(m * a.groups) * 4);
  a.xq = static_cast<int8_t*>(buf.get());
  a.dx = reinterpret_cast<float*>(a.xq + xq_bytes);
  a.t = a.dx + m * a.blocks * 16;
  quantize_activations_avx512(a.m, x, ldx, w, a);
  for_column_chunks(w.n, w.k, pool,
                    [&](int64_t j0, int64_t j1) { quant_gemv_avx512_vnni(a, w, j0, j1, y, ldy, accumulate); });
}

void quant_gemm(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool accumulate,
                const ThreadPool& pool) {
  // Decode on AVX-512 VNNI takes the integer dot: faster than f32 FMA on the dequantised weights for every
  // format at M = 1, 4 and 16 on Zen 5 (1.8-2.5x at M = 1, 3.5-4.3x at M = 16, 1 thread: docs/benchmarks.md),
  // at the cost of rounding x to int8 per 32 inputs, as llama.cpp's Q8_0 / Q4_0 dot products do.
  // Prefill too: an int8 GEMM on repacked panels beats the f32 GEMM on dequantised ones (docs/benchmarks.md).
  static const bool vnni = quant_cpu_has_vnni();
  // NF4 (a table of 16 floats, no integer codes) keeps the f32 kernels of its tier.
  const bool int_codes = w.spec.format != QuantFormat::kNf4;
  if (vnni && int_codes && cpu_tier() == CpuTier::kAvx512 && m >= 1) {
    if (m <= kQuantGemvMaxM) return quant_gemm_vnni(m, x, ldx, w, y, ldy, accumulate, pool);
    return quant_gemm_vnni_prefill(m, x, ldx, w, y, ldy, accumulate, pool);
  }
  // The AVX2 tier's decode: vpmaddubsw on int8 activations, 1.1-1.4x the f32 FMA on dequantised codes
  // (LATHE_CPU=avx2 on Zen 5); its prefill: vpmaddubsw (or AVX-VNNI) on repacked panels, 1.3-3x the f32 GEMM
  // on dequantised ones (Intel Xeon; docs/benchmarks.md).
  if (int_codes && cpu_tier() == CpuTier::kAvx2 && m >= 1) {
    if (m <= kQuantGemvMaxM) return quant_gemm_avx2_int(m, x, ldx, w, y, ldy, accumulate, pool);
    return quant_gemm_avx2_prefill(m, x, ldx, w, y, ldy, accumulate, pool);
  }
  quant_gemm_with(cpu_tier(), m, x, ldx, w, y, ldy, accumulate, pool);
}

}  // namespace lathe::cpu
