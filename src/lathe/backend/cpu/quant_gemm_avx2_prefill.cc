// AVX2 integer-dot quantised prefill GEMM (CPUs without AVX-512 VNNI): y (=|+=) x · deq(W)ᵀ for any m, x
// quantised per unit of 32 inputs to int8 as the decode paths do (ref::quant_matmul_q8_activations is the
// definition), tiled for reuse as quant_gemm_avx512_vnni.cc is, with vpmaddubsw (u8 x s8 -> int16 sums of 2
// products) + vpmaddwd by ones (-> int32 sums of 4) in place of vpdpbusd:
//  - Panel layout, per 8 W rows (y columns) and unit u: 8 steps of 4 inputs, each [8 columns][4 codes] (one
//    ymm: a 4-input dot per int32 lane), then the 8 columns' scales dw (f32), then, for int4-asym, their
//    minimums. A worker packs 4 such panels (32 columns) and runs every row of x against them in L2.
//  - x rides in the signed operand: 4 codes broadcast to the 8 lanes.
//  - int4 (0..15) and int6 (0..63) codes are the unsigned operand as stored; a unit's int32 sums start at
//    −off·Σxq (off 8 or 32), so they are Σ (q − off)·xq. One vpmaddubsw is at most 2·15·127 = 3810 (int6:
//    16002), so int4 adds all 8 steps of a unit in int16 before one vpmaddwd, int6 2 steps.
//  - int8 codes are signed: the unsigned operand is |q| (once per step) and the signed one xq with q's sign
//    (vpsignb per row), each product exact; 2·128·127 fits int16 but two do not: one vpmaddwd per step.
//  - int4-asym (deq = d·q + m) keeps the raw nibbles, sums from 0, and adds m·Σxq after scaling.
// Per unit and row: y += dx_u · (dw ⊙ sums) (one convert, one multiply, one FMA per 8 lanes).
// With AVX-VNNI (cpu_use_avx_vnni(): Alder Lake and later client cores) the same panels meet x in vpdpbusd
// on ymm, one instruction per step and row for every format (int8 codes flipped to q + 128, off 128):
// 1.1-2.3x the vpmaddubsw form (LATHE_CPU=avx2 on an Intel Xeon, docs/benchmarks.md).
// Against the tier's f32 GEMM on dequantised panels (quant_gemm.cc), which nf4 keeps: 1.3-3x.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>

#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/backend/cpu/quant_unit_codes.h"
#include "lathe/backend/cpu/simd_intrinsics.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"

#define LATHE_AVX_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))

namespace lathe::cpu {
namespace {

constexpr int64_t kCols = 8;                    // W rows per panel: the 8 int32 lanes of a ymm
constexpr int64_t kPanels = 4;                  // panels per task: 32 columns of y
constexpr int kMr = 4;                          // rows of x per tile
constexpr int64_t kStepBytes = kCols * 4;       // one step's codes: [8 columns][4 inputs]
constexpr int64_t kCodeBytes = 8 * kStepBytes;  // one unit's codes for 8 columns

int64_t unit_bytes(QuantFormat f) {
  return kCodeBytes + kCols * static_cast<int64_t>(sizeof(float)) * (quant_has_mins(f) ? 2 : 1);
}

// Steps a unit's int16 sums run before vpmaddwd widens them (the int16 bounds above).
constexpr int int16_run(QuantFormat f) { return f == QuantFormat::kInt8 ? 1 : f == QuantFormat::kInt6 ? 2 : 8; }

// x quantised per unit: codes in input order [m][k], dx [m][units], corr [m][units] (−off·Σxq for int4 /
// int6 / int8 under AVX-VNNI, Σxq for int4-asym; quantize_activation_row_avx2).
struct PrefillActivations {
  int64_t units = 0;
  const int8_t* xq = nullptr;
  const float* dx = nullptr;
  const int32_t* corr = nullptr;
};

// The 8 dwords of r[c] (row c's unit: 4 inputs per dword) to r[s] = dword s of each row: step s's operand.
LATHE_AVX2 inline void transpose_8x8_dwords(__m256i r[8]) {
  __m256i t[8], q[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);      // rows 2i, 2i+1: dwords 0, 1 | 4, 5
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);  // dwords 2, 3 | 6, 7
  }
  for (int h = 0; h < 2; ++h) {                                        // rows 0-3, then 4-7
    q[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);      // dword 0 | 4 of 4 rows
    q[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);      // 1 | 5
    q[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);  // 2 | 6
    q[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);  // 3 | 7
  }
  for (int s = 0; s < 4; ++s) {
    r[s] = _mm256_permute2x128_si256(q[s], q[4 + s], 0x20);
    r[s + 4] = _mm256_permute2x128_si256(q[s], q[4 + s], 0x31);
  }
}

// Packs W rows [j0, j0 + 8) into `panel` (rows past n read row j0 and get zero scales: their columns are 0).
// kVnni: int8 codes flipped to q + 128, vpdpbusd's unsigned operand.
template <QuantFormat F, bool kVnni>
LATHE_AVX2 void pack_panel(const QuantMatrix& w, int64_t j0, uint8_t* panel) {
  const int64_t units = w.k / kQuantUnit, groups = w.k / w.spec.group, row_bytes = quant_row_bytes(F, w.k);
  const int64_t valid = std::min(kCols, w.n - j0), ub = unit_bytes(F);
  for (int64_t u = 0; u < units; ++u) {
    uint8_t* out = panel + u * ub;
    __m256i r[8];
    for (int64_t c = 0; c < kCols; ++c) {
      const uint8_t* row = w.codes + (j0 + (c < valid ? c : 0)) * row_bytes;
      if constexpr (F == QuantFormat::kInt8) {
        r[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + u * kQuantUnit));
      } else {
        __m128i lo, hi;
        unit_code_halves<F>(row, w.k, u, lo, hi);
        r[c] = _mm256_set_m128i(hi, lo);  // the unit's 32 codes in input order
      }
    }
    transpose_8x8_dwords(r);
    if constexpr (kVnni && F == QuantFormat::kInt8)
      for (int s = 0; s < 8; ++s) r[s] = _mm256_xor_si256(r[s], _mm256_set1_epi8(static_cast<char>(0x80)));
    for (int s = 0; s < 8; ++s) _mm256_store_si256(reinterpret_cast<__m256i*>(out + s * kStepBytes), r[s]);
    const int64_t g = u * kQuantUnit / w.spec.group;
    float* dw = reinterpret_cast<float*>(out + kCodeBytes);
    for (int64_t c = 0; c < kCols; ++c) dw[c] = c < valid ? f16_to_f32(w.scales[(j0 + c) * groups + g]) : 0.f;
    if constexpr (F == QuantFormat::kInt4Asym)
      for (int64_t c = 0; c < kCols; ++c) dw[kCols + c] = c < valid ? f16_to_f32(w.mins[(j0 + c) * groups + g]) : 0.f;
  }
}

// Step st of unit u (inputs 4·st .. 4·st + 3) for R rows of x: h[r] (=|+=) the int16 pair sums of code·xq.
template <QuantFormat F, int R>
LATHE_AVX2 inline void step_products(const PrefillActivations& a, int64_t i0, int64_t k, int64_t u, const uint8_t* pw,
                                     int st, __m256i h[R], bool add) {
  constexpr bool kInt8 = F == QuantFormat::kInt8;
  const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(pw + st * kStepBytes));
  const __m256i uc = kInt8 ? _mm256_abs_epi8(c) : c;
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    int32_t four;
    std::memcpy(&four, a.xq + (i0 + r) * k + u * kQuantUnit + 4 * st, 4);
    const __m256i xb = _mm256_set1_epi32(four);
    const __m256i p = _mm256_maddubs_epi16(uc, kInt8 ? _mm256_sign_epi8(xb, c) : xb);
    h[r] = add ? _mm256_add_epi16(h[r], p) : p;
  }
}

// acc[r] += dx_u · (dw ⊙ sums[r]) (+ m ⊙ Σxq for int4-asym) for unit u of the panel at pw.
template <QuantFormat F, int R>
LATHE_AVX2 inline void scale_unit(const PrefillActivations& a, int64_t i0, int64_t u, const uint8_t* pw,
                                  const __m256i s[R], __m256 acc[R]) {
  const float* sc = reinterpret_cast<const float*>(pw + kCodeBytes);
  const __m256 dw = _mm256_load_ps(sc);
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(s[r]), dw);
    if constexpr (F == QuantFormat::kInt4Asym)
      t = _mm256_fmadd_ps(_mm256_load_ps(sc + kCols),
                          _mm256_set1_ps(static_cast<float>(a.corr[(i0 + r) * a.units + u])), t);
    acc[r] = _mm256_fmadd_ps(t, _mm256_broadcast_ss(a.dx + (i0 + r) * a.units + u), acc[r]);
  }
}

// R rows of y (from y, ldy apart) (=|+=) acc, their first `cols` of 8 columns.
template <int R>
LATHE_AVX2 inline void store_tile(const __m256 acc[R], float* y, int64_t ldy, int64_t cols, bool accumulate) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(cols)), lanes);
  for (int r = 0; r < R; ++r) {
    float* out = y + r * ldy;
    __m256 v = acc[r];
    if (accumulate) v = _mm256_add_ps(v, _mm256_maskload_ps(out, mask));
    _mm256_maskstore_ps(out, mask, v);
  }
}

// y rows [i0, i0 + R) x one panel's 8 columns (the first `cols` stored); y points at the panel's column 0.
template <QuantFormat F, int R>
LATHE_AVX2 void tile(const PrefillActivations& a, int64_t i0, int64_t k, const uint8_t* panel, float* y, int64_t ldy,
                     int64_t cols, bool accumulate) {
  constexpr bool kAsym = F == QuantFormat::kInt4Asym, kInt8 = F == QuantFormat::kInt8;
  constexpr int kRun = int16_run(F);
  const int64_t units = a.units, ub = unit_bytes(F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* pw = panel + u * ub;
    __m256i s[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      s[r] = kAsym || kInt8 ? _mm256_setzero_si256() : _mm256_set1_epi32(a.corr[(i0 + r) * units + u]);
#pragma GCC unroll 4
    for (int run = 0; run < 8; run += kRun) {
      __m256i h[R];
      step_products<F, R>(a, i0, k, u, pw, run, h, false);
#pragma GCC unroll 1
      for (int st = run + 1; st < run + kRun; ++st) step_products<F, R>(a, i0, k, u, pw, st, h, true);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(h[r], ones));
    }
    scale_unit<F, R>(a, i0, u, pw, s, acc);
  }
  store_tile<R>(acc, y + i0 * ldy, ldy, cols, accumulate);
}

// The same tile in AVX-VNNI: one vpdpbusd per step and row into int32 sums that start at −off·Σxq (int8's
// off is 128 here: its codes are flipped to unsigned). A function of its own because its target adds
// avxvnni, which the plain AVX2 tile must never be compiled with (it runs on CPUs without it).
template <QuantFormat F, int R>
LATHE_AVX_VNNI void tile_vnni(const PrefillActivations& a, int64_t i0, int64_t k, const uint8_t* panel, float* y,
                              int64_t ldy, int64_t cols, bool accumulate) {
  constexpr bool kAsym = F == QuantFormat::kInt4Asym;
  const int64_t units = a.units, ub = unit_bytes(F);
  __m256 acc[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* pw = panel + u * ub;
    __m256i s[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      s[r] = kAsym ? _mm256_setzero_si256() : _mm256_set1_epi32(a.corr[(i0 + r) * units + u]);
#pragma GCC unroll 8
    for (int st = 0; st < 8; ++st) {
      const __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(pw + st * kStepBytes));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, a.xq + (i0 + r) * k + u * kQuantUnit + 4 * st, 4);
        s[r] = _mm256_dpbusd_avx_epi32(s[r], c, _mm256_set1_epi32(four));
      }
    }
    scale_unit<F, R>(a, i0, u, pw, s, acc);
  }
  store_tile<R>(acc, y + i0 * ldy, ldy, cols, accumulate);
}

template <QuantFormat F, bool kVnni>
void run_panel(const PrefillActivations& a, int64_t i0, int64_t rows, int64_t k, const uint8_t* panel, float* y,
               int64_t ldy, int64_t cols, bool accumulate) {
  const auto pick = [&](auto r) {
    constexpr int R = decltype(r)::value;
    if constexpr (kVnni)
      tile_vnni<F, R>(a, i0, k, panel, y, ldy, cols, accumulate);
    else
      tile<F, R>(a, i0, k, panel, y, ldy, cols, accumulate);
  };
  switch (rows) {
    case 4: return pick(std::integral_constant<int, 4>{});
    case 3: return pick(std::integral_constant<int, 3>{});
    case 2: return pick(std::integral_constant<int, 2>{});
    default: return pick(std::integral_constant<int, 1>{});
  }
}

template <QuantFormat F, bool kVnni>
void gemm_format(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool accumulate,
                 const ThreadPool& pool) {
  const int64_t units = w.k / kQuantUnit;
  const int64_t tasks = (w.n + kPanels * kCols - 1) / (kPanels * kCols);
  const size_t panel_bytes = static_cast<size_t>(units * unit_bytes(F));  // a multiple of 32
  const size_t task_bytes = kPanels * panel_bytes;
  const size_t xq_bytes = static_cast<size_t>(m * w.k + 63) / 64 * 64;
  const size_t side = static_cast<size_t>(m * units) * 4;
  const int workers = std::max(1, pool.n_threads());
  const std::shared_ptr<void> buf =
      current_context().alloc.allocate(xq_bytes + 2 * side + static_cast<size_t>(workers) * task_bytes + 64);
  auto* base = static_cast<uint8_t*>(buf.get());
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* dx = reinterpret_cast<float*>(base + xq_bytes);
  auto* corr = reinterpret_cast<int32_t*>(base + xq_bytes + side);
  auto* panels =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base + xq_bytes + 2 * side) + 63) & ~uintptr_t{63});
  const int off = F == QuantFormat::kInt4   ? 8
                  : F == QuantFormat::kInt6 ? 32
                  : kVnni && F == QuantFormat::kInt8 ? 128  // its codes flipped to q + 128
                                                     : 0;
  constexpr int64_t kRowsPerTask = 16;
  pool.parallel_for((m + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t task, int) {
    for (int64_t i = task * kRowsPerTask; i < std::min(m, (task + 1) * kRowsPerTask); ++i)
      quantize_activation_row_avx2(x + i * ldx, w.k, w.spec.group / kQuantUnit, off, xq + i * w.k, dx + i * units,
                                   /*t=*/nullptr, corr + i * units);
  });
  const PrefillActivations a{units, xq, dx, corr};
  pool.parallel_for(tasks, [&](int64_t b, int worker) {
    uint8_t* mine = panels + static_cast<size_t>(worker) * task_bytes;
    const int64_t j0 = b * kPanels * kCols, width = std::min(kPanels * kCols, w.n - j0);
    const int64_t n_panels = (width + kCols - 1) / kCols;
    for (int64_t p = 0; p < n_panels; ++p) pack_panel<F, kVnni>(w, j0 + p * kCols, mine + p * panel_bytes);
    // Rows outer, panels inner: a tile's 4 rows of xq stay in L1 across the 4 panels.
    for (int64_t i0 = 0; i0 < m; i0 += kMr)
      for (int64_t p = 0; p < n_panels; ++p)
        run_panel<F, kVnni>(a, i0, std::min<int64_t>(kMr, m - i0), w.k, mine + p * panel_bytes, y + j0 + p * kCols,
                            ldy, std::min(kCols, width - p * kCols), accumulate);
  });
}

}  // namespace

void quant_gemm_avx2_prefill_with(bool avx_vnni, int64_t m, const float* x, int64_t ldx, const QuantMatrix& w,
                                  float* y, int64_t ldy, bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  LATHE_ASSERT(cpu_max_tier() >= CpuTier::kAvx2, "quant_gemm_avx2_prefill: a CPU without AVX2");
  LATHE_ASSERT(!avx_vnni || cpu_has_avx_vnni(), "quant_gemm_avx2_prefill: AVX-VNNI asked of a CPU without it");
  const auto run = [&](auto vnni) {
    constexpr bool V = decltype(vnni)::value;
    switch (w.spec.format) {
      case QuantFormat::kInt8: return gemm_format<QuantFormat::kInt8, V>(m, x, ldx, w, y, ldy, accumulate, pool);
      case QuantFormat::kInt4: return gemm_format<QuantFormat::kInt4, V>(m, x, ldx, w, y, ldy, accumulate, pool);
      case QuantFormat::kInt4Asym:
        return gemm_format<QuantFormat::kInt4Asym, V>(m, x, ldx, w, y, ldy, accumulate, pool);
      case QuantFormat::kInt6: return gemm_format<QuantFormat::kInt6, V>(m, x, ldx, w, y, ldy, accumulate, pool);
      default: LATHE_ASSERT(false, "quant_gemm_avx2_prefill: format ", quant_spec_name(w.spec));
    }
  };
  if (avx_vnni) return run(std::true_type{});
  run(std::false_type{});
}

void quant_gemm_avx2_prefill(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                             bool accumulate, const ThreadPool& pool) {
  quant_gemm_avx2_prefill_with(cpu_use_avx_vnni(), m, x, ldx, w, y, ldy, accumulate, pool);
}

}  // namespace lathe::cpu
