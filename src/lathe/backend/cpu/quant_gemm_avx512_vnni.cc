// AVX-512 VNNI quantised prefill GEMM: y (=|+=) x · deq(W)ᵀ for m > kQuantGemvMaxM rows, in integer dot
// products as the decode GEMV does (x quantised per unit of 32 inputs to int8, ref::quantize_activation_unit),
// but tiled for reuse: each worker repacks a block of 32 W rows (columns of y) into vpdpbusd's operand
// order and runs every row of x against it while it sits in L2.
//  - Panel layout, per unit u of 32 inputs: 8 steps of 4 inputs, each [32 columns][4 codes] (128 bytes, two
//    zmm: one 4-input dot per int32 lane), then the 32 columns' scales dw (f32), then, for int4-asym, their
//    minimums. Codes are unsigned as vpdpbusd takes them: int8 q + 128 (xor 0x80), int4 its nibble 0..15,
//    int6 its nibble with the high bits of its plane at bits 4-5 (0..63).
//  - x rides in the signed operand: 4 codes broadcast to the 16 lanes. Σ c·xq exceeds Σ q'·xq (q' the
//    signed code) by off·Σxq (off 128 for int8, 8 for int4, 32 for int6), so each unit's int32 sums start at −off·Σxq;
//    int4-asym instead adds m·Σxq in f32 after scaling.
//  - Per unit and row: y += dx_u · dw ⊙ sums (one convert, one multiply, one FMA per 16 lanes); 24 vpdpbusd
//    per 4 rows of x x 32 columns x 32 inputs against 8 + 16 other vector ops.
// Against the f32 GEMM on dequantised panels (the path for other tiers and formats): half the FLOP-time of
// f32 FMA per product, at the cost of x's int8 rounding (within Σ|w|·dx/2 per unit, as the decode path).
#include "lathe/backend/cpu/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "lathe/backend/cpu/quant_gemm.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/ref/quant.h"

#define LATHE_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma,f16c")))

namespace lathe::cpu {
namespace {

constexpr int64_t kCols = 32;           // W rows (y columns) per panel: two zmm of int32 lanes
constexpr int kMr = 4;                  // rows of x per tile: 4 x 2 int32 sums + 4 x 2 f32 accumulators
constexpr int64_t kStepBytes = kCols * 4;
constexpr int64_t kCodeBytes = 8 * kStepBytes;  // one unit's codes for 32 columns

int64_t unit_bytes(QuantFormat f) {
  return kCodeBytes + kCols * static_cast<int64_t>(sizeof(float)) * (quant_has_mins(f) ? 2 : 1);
}

// Activations quantised per unit: codes row-major [m][k], dx [m][units], and the per-unit correction:
// −off·Σxq for the symmetric formats (the int32 sums' start), Σxq for int4-asym (times the minimum).
struct PrefillActivations {
  int8_t* xq = nullptr;
  float* dx = nullptr;
  int32_t* corr = nullptr;
};

LATHE_AVX512_VNNI void quantize_rows(int64_t i0, int64_t i1, const float* x, int64_t ldx, int64_t k, int off,
                                     const PrefillActivations& a) {
  const int64_t units = k / kQuantUnit;
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t u = 0; u < units; ++u) {
      const float* src = x + i * ldx + u * kQuantUnit;
      const __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
      // cvtps rounds to nearest even in the default MXCSR mode: ref::quantize_activation_unit's nearbyint.
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
      int8_t* dst = a.xq + i * k + u * kQuantUnit;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm512_cvtsepi32_epi8(q1));
      const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
      a.dx[i * units + u] = dx;
      a.corr[i * units + u] = off == 0 ? sum : -off * sum;
    }
}

// Packs W rows [j0, j0 + 32) (rows past n: zero scales, so their columns come out 0) into `panel`.
template <QuantFormat F>
LATHE_AVX512_VNNI void pack_panel(const QuantMatrix& w, int64_t j0, uint8_t* panel) {
  const int64_t units = w.k / kQuantUnit, groups = w.k / w.spec.group, row_bytes = quant_row_bytes(F, w.k);
  const int64_t valid = std::min(kCols, w.n - j0), ub = unit_bytes(F);
  // Byte offsets of the 32 rows' codes; rows past n read row j0 (their scales are 0).
  alignas(64) int32_t base[kCols];
  for (int64_t c = 0; c < kCols; ++c) base[c] = static_cast<int32_t>((c < valid ? c : 0) * row_bytes);
  const __m512i base0 = _mm512_load_si512(base), base1 = _mm512_load_si512(base + 16);
  const uint8_t* codes = w.codes + j0 * row_bytes;
  for (int64_t u = 0; u < units; ++u) {
    uint8_t* out = panel + u * ub;
    if constexpr (F == QuantFormat::kInt8) {
      // Step s: dword s of each row's 32 codes, flipped to unsigned.
      const uint8_t* unit = codes + u * kQuantUnit;
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
      for (int s = 0; s < 8; ++s) {
        const __m512i g0 = _mm512_i32gather_epi32(base0, unit + 4 * s, 1);
        const __m512i g1 = _mm512_i32gather_epi32(base1, unit + 4 * s, 1);
        _mm512_storeu_si512(out + s * kStepBytes, _mm512_xor_si512(g0, flip));
        _mm512_storeu_si512(out + s * kStepBytes + 64, _mm512_xor_si512(g1, flip));
      }
    } else {
      // A unit's 16 bytes hold inputs 0-15 in the low nibbles and 16-31 in the high ones: dword s (s < 4)
      // gives steps s (low nibbles) and s + 4 (high nibbles).
      const uint8_t* unit = codes + u * (kQuantUnit / 2);
      const __m512i low = _mm512_set1_epi8(0x0f);
      for (int s = 0; s < 4; ++s) {
        const __m512i g0 = _mm512_i32gather_epi32(base0, unit + 4 * s, 1);
        const __m512i g1 = _mm512_i32gather_epi32(base1, unit + 4 * s, 1);
        _mm512_storeu_si512(out + s * kStepBytes, _mm512_and_si512(g0, low));
        _mm512_storeu_si512(out + s * kStepBytes + 64, _mm512_and_si512(g1, low));
        _mm512_storeu_si512(out + (s + 4) * kStepBytes, _mm512_and_si512(_mm512_srli_epi16(g0, 4), low));
        _mm512_storeu_si512(out + (s + 4) * kStepBytes + 64, _mm512_and_si512(_mm512_srli_epi16(g1, 4), low));
      }
      if constexpr (F == QuantFormat::kInt6) {
        // Steps s and s + 4 (inputs 4s.. and 16 + 4s..) take bit pairs s/2 and 2 + s/2 of the unit's high
        // bytes 4(s%2) .. 4(s%2) + 3 (tensor/quant_weight.h), lifted to bits 4-5 and ORed into the nibbles.
        const uint8_t* high = codes + int6_high_plane(w.k) + u * 8;
        const __m512i pair = _mm512_set1_epi8(0x30);
        for (int s = 0; s < 4; ++s) {
          const __m512i h[2] = {_mm512_i32gather_epi32(base0, high + 4 * (s % 2), 1),
                                _mm512_i32gather_epi32(base1, high + 4 * (s % 2), 1)};
          for (int half = 0; half < 2; ++half) {
            const int lo_shift = 4 - 2 * (s / 2);  // pair s/2 (0 or 1) up to bits 4-5
            const int hi_shift = 2 * (s / 2);      // pair 2 + s/2: down by 0 or 2
            uint8_t* lo = out + s * kStepBytes + 64 * half;
            uint8_t* hi = out + (s + 4) * kStepBytes + 64 * half;
            const __m512i up = _mm512_and_si512(_mm512_sll_epi16(h[half], _mm_cvtsi32_si128(lo_shift)), pair);
            const __m512i down = _mm512_and_si512(_mm512_srl_epi16(h[half], _mm_cvtsi32_si128(hi_shift)), pair);
            _mm512_storeu_si512(lo, _mm512_or_si512(_mm512_loadu_si512(lo), up));
            _mm512_storeu_si512(hi, _mm512_or_si512(_mm512_loadu_si512(hi), down));
          }
        }
      }
    }
    const int64_t g = u * kQuantUnit / w.spec.group;
    float* dw = reinterpret_cast<float*>(out + kCodeBytes);
    for (int64_t c = 0; c < kCols; ++c) dw[c] = c < valid ? f16_to_f32(w.scales[(j0 + c) * groups + g]) : 0.f;
    if constexpr (F == QuantFormat::kInt4Asym)
      for (int64_t c = 0; c < kCols; ++c) dw[kCols + c] = c < valid ? f16_to_f32(w.mins[(j0 + c) * groups + g]) : 0.f;
  }
}

// y rows [i0, i0 + R) x the panel's 32 columns (the first `cols` stored).
template <QuantFormat F, int R>
LATHE_AVX512_VNNI void tile(const PrefillActivations& a, int64_t i0, int64_t k, const uint8_t* panel, float* y,
                            int64_t ldy, int64_t cols, bool accumulate) {
  constexpr bool kAsym = F == QuantFormat::kInt4Asym;
  const int64_t units = k / kQuantUnit, ub = unit_bytes(F);
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const uint8_t* pw = panel + u * ub;
    __m512i s[R][2];
    for (int r = 0; r < R; ++r)
      s[r][0] = s[r][1] = kAsym ? _mm512_setzero_si512() : _mm512_set1_epi32(a.corr[(i0 + r) * units + u]);
    for (int st = 0; st < 8; ++st) {
      const __m512i w0 = _mm512_load_si512(pw + st * kStepBytes), w1 = _mm512_load_si512(pw + st * kStepBytes + 64);
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, a.xq + (i0 + r) * k + u * kQuantUnit + 4 * st, 4);
        const __m512i xb = _mm512_set1_epi32(four);
        s[r][0] = _mm512_dpbusd_epi32(s[r][0], w0, xb);
        s[r][1] = _mm512_dpbusd_epi32(s[r][1], w1, xb);
      }
    }
    const float* sc = reinterpret_cast<const float*>(pw + kCodeBytes);
    const __m512 dw0 = _mm512_load_ps(sc), dw1 = _mm512_load_ps(sc + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 d = _mm512_set1_ps(a.dx[(i0 + r) * units + u]);
      __m512 t0 = _mm512_mul_ps(_mm512_cvtepi32_ps(s[r][0]), dw0);
      __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(s[r][1]), dw1);
      if constexpr (kAsym) {
        const __m512 sum = _mm512_set1_ps(static_cast<float>(a.corr[(i0 + r) * units + u]));
        t0 = _mm512_fmadd_ps(_mm512_load_ps(sc + 32), sum, t0);
        t1 = _mm512_fmadd_ps(_mm512_load_ps(sc + 48), sum, t1);
      }
      acc[r][0] = _mm512_fmadd_ps(t0, d, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(t1, d, acc[r][1]);
    }
  }
  const __mmask16 m0 = static_cast<__mmask16>(cols >= 16 ? 0xffff : (1u << cols) - 1);
  const __mmask16 m1 = static_cast<__mmask16>(cols >= 32 ? 0xffff : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
  for (int r = 0; r < R; ++r) {
    float* out = y + (i0 + r) * ldy;
    __m512 v0 = acc[r][0], v1 = acc[r][1];
    if (accumulate) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, out));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, out + 16));
    }
    _mm512_mask_storeu_ps(out, m0, v0);
    _mm512_mask_storeu_ps(out + 16, m1, v1);
  }
}

template <QuantFormat F>
LATHE_AVX512_VNNI void run_panel(const PrefillActivations& a, int64_t m, int64_t k, const uint8_t* panel, float* y,
                                 int64_t ldy, int64_t cols, bool accumulate) {
  int64_t i = 0;
  for (; i + kMr <= m; i += kMr) tile<F, kMr>(a, i, k, panel, y, ldy, cols, accumulate);
  switch (m - i) {
    case 3: tile<F, 3>(a, i, k, panel, y, ldy, cols, accumulate); break;
    case 2: tile<F, 2>(a, i, k, panel, y, ldy, cols, accumulate); break;
    case 1: tile<F, 1>(a, i, k, panel, y, ldy, cols, accumulate); break;
    default: break;
  }
}

template <QuantFormat F>
void gemm_format(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool accumulate,
                 const ThreadPool& pool) {
  const int64_t units = w.k / kQuantUnit, blocks = (w.n + kCols - 1) / kCols;
  const size_t panel_bytes = static_cast<size_t>(units * unit_bytes(F));
  const size_t xq_bytes = static_cast<size_t>(m * w.k), side = static_cast<size_t>(m * units) * 4;
  const int workers = std::max(1, pool.n_threads());
  // Per worker: one panel, 64-byte aligned (the tile's aligned loads).
  const size_t panel_stride = (panel_bytes + 63) / 64 * 64;
  const std::shared_ptr<void> buf = current_context().alloc.allocate(
      xq_bytes + 2 * side + static_cast<size_t>(workers) * panel_stride + 64);
  auto* base = static_cast<uint8_t*>(buf.get());
  PrefillActivations a{reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + xq_bytes),
                       reinterpret_cast<int32_t*>(base + xq_bytes + side)};
  uint8_t* panels = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base + xq_bytes + 2 * side) + 63) & ~uintptr_t{63});
  const int off = F == QuantFormat::kInt8 ? 128 : F == QuantFormat::kInt4 ? 8 : F == QuantFormat::kInt6 ? 32 : 0;
  constexpr int64_t kRowsPerTask = 16;
  pool.parallel_for((m + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t, int) {
    quantize_rows(t * kRowsPerTask, std::min(m, (t + 1) * kRowsPerTask), x, ldx, w.k, off, a);
  });
  pool.parallel_for(blocks, [&](int64_t b, int worker) {
    uint8_t* panel = panels + static_cast<size_t>(worker) * panel_stride;
    pack_panel<F>(w, b * kCols, panel);
    run_panel<F>(a, m, w.k, panel, y + b * kCols, ldy, std::min(kCols, w.n - b * kCols), accumulate);
  });
}

}  // namespace

void quant_gemm_vnni_prefill(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                             bool accumulate, const ThreadPool& pool) {
  if (m <= 0 || w.n <= 0) return;
  LATHE_ASSERT(quant_cpu_has_vnni(), "quant_gemm_vnni_prefill: a CPU without AVX-512 VNNI");
  switch (w.spec.format) {
    case QuantFormat::kInt8: return gemm_format<QuantFormat::kInt8>(m, x, ldx, w, y, ldy, accumulate, pool);
    case QuantFormat::kInt4: return gemm_format<QuantFormat::kInt4>(m, x, ldx, w, y, ldy, accumulate, pool);
    case QuantFormat::kInt4Asym: return gemm_format<QuantFormat::kInt4Asym>(m, x, ldx, w, y, ldy, accumulate, pool);
    case QuantFormat::kInt6: return gemm_format<QuantFormat::kInt6>(m, x, ldx, w, y, ldy, accumulate, pool);
    default: LATHE_ASSERT(false, "quant_gemm_vnni_prefill: format ", quant_spec_name(w.spec));
  }
}

}  // namespace lathe::cpu
