// Scalar reference of NF4 (specs/posttrain.md §3.3, bitsandbytes' quantize_4bit / dequantize_4bit with
// compress_statistics): the definition every NF4 kernel and the folder reader/writer are held to. The rules are those
// of bitsandbytes' reference ("default") backend (backends/default/ops.py): full blocks multiply by the f32 reciprocal
// of max(absmax, 1e-38) and store the unclamped absmax; a short last block stores the clamped absmax and divides; the
// code is torch.bucketize against the f32 midpoints of consecutive code values (a value on a midpoint takes the lower
// code).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lathe/ref/dynamic_map.h"

namespace lathe::ref {

// The NF4 code, 4-bit values 0..15 (quantiles of N(0, 1): create_normal_map(offset=0.9677083)).
inline constexpr float kNf4Code[16] = {-1.0f,
                                       -0.6961928009986877f,
                                       -0.5250730514526367f,
                                       -0.39491748809814453f,
                                       -0.28444138169288635f,
                                       -0.18477343022823334f,
                                       -0.09105003625154495f,
                                       0.0f,
                                       0.07958029955625534f,
                                       0.16093020141124725f,
                                       0.24611230194568634f,
                                       0.33791524171829224f,
                                       0.44070982933044434f,
                                       0.5626170039176941f,
                                       0.7229568362236023f,
                                       1.0f};

inline constexpr int64_t kNf4NestedBlocksize = 256;  // double quantisation's blocks of absmax values
inline constexpr float kNf4MinAbsmax = 1e-38f;       // bitsandbytes' clamp before the reciprocal

// The index i of the first midpoint (code[i] + code[i+1]) / 2 (in f32) with x <= it, or n - 1: the code nearest x, a
// tie going to the lower one (torch.bucketize, right=False). code ascending, n entries.
inline int bucketize_code(const float *code, int n, float x) {
  int lo = 0, hi = n - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const float m = (code[mid] + code[mid + 1]) / 2.f;
    if (x <= m)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// bitsandbytes' blockwise quantisation of x [n] (flattened) against `code` [ncode]: q [n] indices, absmax [ceil(n /
// blocksize)] f32.
inline void quantize_blockwise(const float *x, int64_t n, int64_t blocksize, const float *code, int ncode, uint8_t *q,
                               float *absmax) {
  for (int64_t b = 0; b * blocksize < n; ++b) {
    const int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
    float amax = 0.f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const bool full = end - begin == blocksize;
    const float clamped = std::max(amax, kNf4MinAbsmax), inv = 1.f / clamped;
    absmax[b] = full ? amax : clamped;
    for (int64_t i = begin; i < end; ++i) {
      const float s = std::clamp(full ? x[i] * inv : x[i] / clamped, -1.f, 1.f);
      q[i] = static_cast<uint8_t>(bucketize_code(code, ncode, s));
    }
  }
}

// Element p's 4-bit code in bitsandbytes' packing (element 2i in the high nibble of byte i).
inline int nf4_code(const uint8_t *packed, int64_t p) {
  const uint8_t byte = packed[p / 2];
  return p % 2 == 0 ? byte >> 4 : byte & 15;
}

// Block b's absmax from its double-quantised form: map[code]·nested_absmax + offset, two f32 roundings (bitsandbytes'
// dequantize_blockwise, then `absmax += offset`).
inline float nf4_nested_absmax_at(const float *map, const uint8_t *codes, const float *nested_absmax,
                                  int64_t nested_blocksize, float offset, int64_t b) {
  const float scaled = map[codes[b]] * nested_absmax[b / nested_blocksize];
  return scaled + offset;
}

// Element p's weight: nf4[q]·absmax of its block (f32, as every kernel computes it).
inline float nf4_dequantize_at(const uint8_t *packed, const float *absmax, int64_t blocksize, int64_t p) {
  return kNf4Code[nf4_code(packed, p)] * absmax[p / blocksize];
}

// y[i, j] (=|+=) Σ_p x[i, p] · deq(W)[j, p], summed in double: the specification of the NF4 kernels. W [n, k] is the
// flattened NF4 weight (element j·k + p), absmax [blocks] its blocks' absmax; x [m, k] rows ldx apart, y [m, n] rows
// ldy apart.
inline void nf4_matmul(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const uint8_t *packed,
                       const float *absmax, int64_t blocksize, float *y, int64_t ldy, bool accumulate) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double acc = accumulate ? y[i * ldy + j] : 0.0;
      for (int64_t p = 0; p < k; ++p)
        acc += static_cast<double>(x[i * ldx + p]) * nf4_dequantize_at(packed, absmax, blocksize, j * k + p);
      y[i * ldy + j] = static_cast<float>(acc);
    }
}

// The block statistics of one NF4 weight, as quantize_4bit(compress_statistics=true) makes them.
struct Nf4Quantized {
  std::vector<uint8_t> packed;        // [ceil(n / 2)]
  std::vector<float> absmax;          // [blocks] f32 (before double quantisation)
  std::vector<uint8_t> absmax_codes;  // [blocks] indices into kDynamicMap8
  std::vector<float> nested_absmax;   // [ceil(blocks / 256)]
  float offset = 0.f;                 // mean(absmax)
  std::vector<float> absmax_used;     // [blocks]: code8[q]·nested_absmax + offset,
                                      // what dequantisation uses
};

// offset = mean(absmax): the exact mean rounded to f32 (torch's f32 reduction order is not specified; this is the value
// it approximates).
inline float nf4_absmax_mean(const std::vector<float> &absmax) {
  double sum = 0.0;
  for (float a : absmax) sum += a;
  return static_cast<float>(sum / static_cast<double>(absmax.size()));
}

// Quantises x [n] (a weight flattened row-major) to NF4 with blocks of `blocksize` and double-quantised statistics
// (offset, 8-bit dynamic codes in blocks of 256, f32 nested absmax).
inline Nf4Quantized nf4_quantize(const float *x, int64_t n, int64_t blocksize) {
  Nf4Quantized r;
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  std::vector<uint8_t> q(static_cast<size_t>(n + 1),
                         7);  // an odd count pads with 0.0 (code 7)
  r.absmax.resize(static_cast<size_t>(blocks));
  quantize_blockwise(x, n, blocksize, kNf4Code, 16, q.data(), r.absmax.data());
  r.packed.resize(static_cast<size_t>((n + 1) / 2));
  for (int64_t i = 0; i < (n + 1) / 2; ++i) r.packed[i] = static_cast<uint8_t>((q[2 * i] << 4) | q[2 * i + 1]);
  r.offset = nf4_absmax_mean(r.absmax);
  std::vector<float> centred(r.absmax.size());
  for (size_t b = 0; b < centred.size(); ++b) centred[b] = r.absmax[b] - r.offset;
  r.absmax_codes.resize(centred.size());
  r.nested_absmax.resize(static_cast<size_t>((blocks + kNf4NestedBlocksize - 1) / kNf4NestedBlocksize));
  quantize_blockwise(centred.data(), blocks, kNf4NestedBlocksize, kDynamicMap8, 256, r.absmax_codes.data(),
                     r.nested_absmax.data());
  r.absmax_used.resize(centred.size());
  for (int64_t b = 0; b < blocks; ++b)
    r.absmax_used[b] = nf4_nested_absmax_at(kDynamicMap8, r.absmax_codes.data(), r.nested_absmax.data(),
                                            kNf4NestedBlocksize, r.offset, b);
  return r;
}

}  // namespace lathe::ref
