// Scalar reference of the quantised weight formats (tensor/quant_weight.h): quantise a row, dequantise it,
// and the matmul y = x · deq(W)ᵀ that the CPU kernels are tested against. The rounding rules are those of
// llama.cpp's Q8_0 / Q4_0 / Q4_1 reference quantisers (ggml-quants.c), so the codes of a group match the
// codes llama.cpp writes for the same 32 values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lathe/tensor/dtype.h"
#include "lathe/tensor/quant_weight.h"

// ggml's quantisers round x·id, then add 8.5 (or 0.5) and truncate: two roundings. With -march=native GCC
// fuses a·b + c into one FMA (one rounding) in C++, which moves a code by one where x·id + 8.5 is within an
// f32 rounding of an integer (13 of 85M codes of a 110M model, against llama-quantize's), so the quantiser
// is compiled without contraction.
#if defined(__clang__)
#define LATHE_QUANT_NO_FMA
#define LATHE_QUANT_NO_FMA_BODY _Pragma("clang fp contract(off)")
#elif defined(__GNUC__)
#define LATHE_QUANT_NO_FMA __attribute__((optimize("fp-contract=off")))
#define LATHE_QUANT_NO_FMA_BODY
#else
#define LATHE_QUANT_NO_FMA
#define LATHE_QUANT_NO_FMA_BODY
#endif

namespace lathe::ref {

// The integer code of input p of a packed row of k inputs (int8: signed; int4: 0..15; int6: 0..63).
inline int quant_code(QuantFormat f, const uint8_t* codes, int64_t k, int64_t p) {
  if (f == QuantFormat::kInt8) return static_cast<int8_t>(codes[p]);
  const int64_t j = p % kQuantUnit;
  const uint8_t byte = codes[p / kQuantUnit * (kQuantUnit / 2) + j % (kQuantUnit / 2)];
  const int nibble = j < kQuantUnit / 2 ? byte & 15 : byte >> 4;
  if (f != QuantFormat::kInt6) return nibble;
  const uint8_t high = codes[int6_high_plane(k) + p / kQuantUnit * 8 + j % 8];
  return nibble | ((high >> (2 * (j / 8))) & 3) << 4;
}

inline void set_quant_code(QuantFormat f, uint8_t* codes, int64_t k, int64_t p, int q) {
  if (f == QuantFormat::kInt8) {
    codes[p] = static_cast<uint8_t>(static_cast<int8_t>(q));
    return;
  }
  const int64_t j = p % kQuantUnit;
  uint8_t& byte = codes[p / kQuantUnit * (kQuantUnit / 2) + j % (kQuantUnit / 2)];
  const int low = q & 15;
  byte = j < kQuantUnit / 2 ? static_cast<uint8_t>((byte & 0xf0) | low) : static_cast<uint8_t>((byte & 0x0f) | (low << 4));
  if (f != QuantFormat::kInt6) return;
  uint8_t& high = codes[int6_high_plane(k) + p / kQuantUnit * 8 + j % 8];
  const int shift = 2 * static_cast<int>(j / 8);
  high = static_cast<uint8_t>((high & ~(3 << shift)) | ((q >> 4) & 3) << shift);
}

// Quantises x [k] (k a multiple of s.group) into codes [quant_row_bytes], scales [k / group] and, for
// int4-asym, mins [k / group]. The codes are computed with the f32 scale, which is then stored as f16
// (llama.cpp does the same).
LATHE_QUANT_NO_FMA inline void quantize_row(const QuantSpec& s, const float* x, int64_t k, uint8_t* codes, f16* scales,
                                            f16* mins) {
  LATHE_QUANT_NO_FMA_BODY
  const int64_t g = s.group;
  for (int64_t b = 0; b < k / g; ++b) {
    const float* xb = x + b * g;
    if (s.format == QuantFormat::kInt8) {  // d = amax / 127, q = round(x / d) (half away from zero)
      float amax = 0.f;
      for (int64_t j = 0; j < g; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
      scales[b] = f32_to_f16(d);
      for (int64_t j = 0; j < g; ++j)
        set_quant_code(s.format, codes, k, b * g + j, static_cast<int>(std::round(xb[j] * id)));
    } else if (s.format == QuantFormat::kInt4 || s.format == QuantFormat::kInt6) {
      // d = (signed value of largest |x|) / -h, q = x/d + h rounded up at .5, h = 8 (int4) or 32 (int6)
      const float h = s.format == QuantFormat::kInt4 ? 8.f : 32.f;
      const int qmax = s.format == QuantFormat::kInt4 ? 15 : 63;
      float amax = 0.f, vmax = 0.f;
      for (int64_t j = 0; j < g; ++j)
        if (std::fabs(xb[j]) > amax) {
          amax = std::fabs(xb[j]);
          vmax = xb[j];
        }
      const float d = vmax / -h, id = d != 0.f ? 1.f / d : 0.f;
      scales[b] = f32_to_f16(d);
      for (int64_t j = 0; j < g; ++j)
        set_quant_code(s.format, codes, k, b * g + j,
                       std::min(qmax, static_cast<int>(std::floor(xb[j] * id + (h + 0.5f)))));
    } else {  // d = (max - min) / 15, m = min, q = (x - m) / d rounded up at .5
      float lo = xb[0], hi = xb[0];
      for (int64_t j = 1; j < g; ++j) {
        lo = std::min(lo, xb[j]);
        hi = std::max(hi, xb[j]);
      }
      const float d = (hi - lo) / 15.f, id = d != 0.f ? 1.f / d : 0.f;
      scales[b] = f32_to_f16(d);
      mins[b] = f32_to_f16(lo);
      for (int64_t j = 0; j < g; ++j)
        set_quant_code(s.format, codes, k, b * g + j,
                       std::min(15, static_cast<int>(std::floor((xb[j] - lo) * id + 0.5f))));
    }
  }
}

// Input p of a row of k: int8 d·q, int4 d·(q - 8), int6 d·(q - 32), int4-asym d·q + m (f32, as every kernel
// computes it).
inline float dequantize_at(const QuantSpec& s, const uint8_t* codes, const f16* scales, const f16* mins, int64_t k,
                           int64_t p) {
  const int q = quant_code(s.format, codes, k, p);
  const float d = f16_to_f32(scales[p / s.group]);
  switch (s.format) {
    case QuantFormat::kInt8:
      return d * static_cast<float>(q);
    case QuantFormat::kInt4:
      return d * static_cast<float>(q - 8);
    case QuantFormat::kInt6:
      return d * static_cast<float>(q - 32);
    default:
      return d * static_cast<float>(q) + f16_to_f32(mins[p / s.group]);
  }
}

inline void dequantize_row(const QuantSpec& s, const uint8_t* codes, const f16* scales, const f16* mins, int64_t k,
                           float* out) {
  for (int64_t p = 0; p < k; ++p) out[p] = dequantize_at(s, codes, scales, mins, k, p);
}

// y[i, j] = Σ_p x[i, p] · deq(W)[j, p] (+ y[i, j] when accumulate), summed in double: the specification
// the kernels are held to. x [m, k] (rows ldx apart); W [n, k] given per row (row j's codes at codes +
// j * row_bytes, its scales and mins at + j * k / group); y [m, n] (rows ldy apart).
inline void quant_matmul(const QuantSpec& s, int64_t m, int64_t n, int64_t k, const float* x, int64_t ldx,
                         const uint8_t* codes, const f16* scales, const f16* mins, float* y, int64_t ldy,
                         bool accumulate) {
  const int64_t row_bytes = quant_row_bytes(s.format, k), groups = k / s.group;
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t* c = codes + j * row_bytes;
    const f16* sc = scales + j * groups;
    const f16* mn = mins ? mins + j * groups : nullptr;
    for (int64_t i = 0; i < m; ++i) {
      double acc = accumulate ? y[i * ldy + j] : 0.0;
      for (int64_t p = 0; p < k; ++p) acc += static_cast<double>(x[i * ldx + p]) * dequantize_at(s, c, sc, mn, k, p);
      y[i * ldy + j] = static_cast<float>(acc);
    }
  }
}

// The integer-dot path (AVX-512 VNNI): x is quantised per unit of 32 inputs like an int8 weight, but
// rounded to nearest even (the SIMD conversion's rounding): dx = max|x| / 127, xq = nearbyint(x / dx)
// (x · (1 / dx) in f32; xq = 0 where dx = 0). Returns dx.
inline float quantize_activation_unit(const float* x, int8_t* xq) {
  float amax = 0.f;
  for (int64_t j = 0; j < kQuantUnit; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
  for (int64_t j = 0; j < kQuantUnit; ++j) xq[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  return dx;
}

// y[i, j] (=|+=) Σ_units dx_u · Σ_{p in u} deq(W)[j, p] · xq_p with x quantised by quantize_activation_unit:
// what the integer-dot kernel computes (its integer sums are exact), here summed in double.
inline void quant_matmul_q8_activations(const QuantSpec& s, int64_t m, int64_t n, int64_t k, const float* x,
                                        int64_t ldx, const uint8_t* codes, const f16* scales, const f16* mins, float* y,
                                        int64_t ldy, bool accumulate) {
  const int64_t row_bytes = quant_row_bytes(s.format, k), groups = k / s.group;
  std::vector<int8_t> xq(static_cast<size_t>(k));
  std::vector<float> dx(static_cast<size_t>(k / kQuantUnit));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t u = 0; u < k / kQuantUnit; ++u)
      dx[u] = quantize_activation_unit(x + i * ldx + u * kQuantUnit, xq.data() + u * kQuantUnit);
    for (int64_t j = 0; j < n; ++j) {
      double acc = accumulate ? y[i * ldy + j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += dequantize_at(s, codes + j * row_bytes, scales + j * groups, mins ? mins + j * groups : nullptr, k, p) *
               static_cast<double>(dx[p / kQuantUnit]) * xq[p];
      y[i * ldy + j] = static_cast<float>(acc);
    }
  }
}

}  // namespace lathe::ref
