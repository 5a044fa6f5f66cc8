// Register-blocked tile products of the attention kernels (attention.cc), for head dims D that are a
// multiple of 16. Written on GCC/Clang vector types of the build's native width (fvec: one AVX-512, AVX or
// SSE register); a tile of kTileRows query rows keeps its accumulators in registers, with no packing of
// the operands. The blockings are counted in native vectors so that they fit the register file of each
// build: an array of vectors wider than a register (16 floats under AVX2) is kept in memory by GCC.
#pragma once

#include <cstdint>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "lathe/tensor/dtype.h"

namespace lathe::attn {

using f32x16 = float __attribute__((vector_size(64)));
// The same vector at any float address (unaligned moves; may alias the floats). Only references to it
// cross function boundaries: passing 64-byte vectors by value changes the ABI without AVX-512.
using f32x16u = float __attribute__((vector_size(64), aligned(4), may_alias));
constexpr int kTileRows = 4;   // query rows per tile
constexpr int64_t kCols = 32;  // key columns per score block: two vectors

inline const f32x16u& vec_at(const float* p) { return *reinterpret_cast<const f32x16u*>(p); }
inline f32x16u& vec_at(float* p) { return *reinterpret_cast<f32x16u*>(p); }

// The native vector: floats per register, and how many registers the build has for accumulators.
#if defined(__AVX512F__)
constexpr int kLanes = 16, kRegs = 32;
#elif defined(__AVX__)
constexpr int kLanes = 8, kRegs = 16;
#else
constexpr int kLanes = 4, kRegs = 16;
#endif
using fvec = float __attribute__((vector_size(4 * kLanes)));
using fvecu = float __attribute__((vector_size(4 * kLanes), aligned(4), may_alias));
constexpr int kPer16 = 16 / kLanes;  // native vectors per 16 floats

inline fvec load(const float* p) { return *reinterpret_cast<const fvecu*>(p); }
inline void store(float* p, fvec v) { *reinterpret_cast<fvecu*>(p) = v; }

// kLanes consecutive bf16 as one f32 vector: bf16 is the top half of an f32, so zero-extend each 16-bit
// lane to 32 bits and shift it up 16 (exact). With AVX-512 or AVX2 the zero-extension is an intrinsic
// (vpmovzxwd from memory), where GCC 12 splits __builtin_convertvector into two halves (five instructions,
// not two); the AVX-512 one masked with all lanes, as the unmasked one's _mm512_undefined trips GCC 12's
// -Wmaybe-uninitialized once inlined.
inline fvec load(const bf16* p) {
  using u32vec = uint32_t __attribute__((vector_size(4 * kLanes)));
#if defined(__AVX512F__)
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX2__)
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
  using u16vecu = uint16_t __attribute__((vector_size(2 * kLanes), aligned(2), may_alias));
  const u32vec wide = __builtin_convertvector(*reinterpret_cast<const u16vecu*>(p), u32vec);
#endif
  return __builtin_bit_cast(fvec, __builtin_bit_cast(u32vec, wide) << 16);
}

// kLanes consecutive int8 codes as one f32 vector (exact): sign-extended to 32 bits and converted,
// vpmovsxbd + vcvtdq2ps with AVX-512 or AVX2 (the AVX-512 ones masked with all lanes, as for bf16 above).
inline fvec load(const int8_t* p) {
#if defined(__AVX512F__)
  const __m512i wide = _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return __builtin_bit_cast(fvec, _mm512_maskz_cvtepi32_ps(0xffff, wide));
#elif defined(__AVX2__)
  const __m256i wide = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  return __builtin_bit_cast(fvec, _mm256_cvtepi32_ps(wide));
#else
  using i8vecu = int8_t __attribute__((vector_size(kLanes), aligned(1), may_alias));
  return __builtin_convertvector(*reinterpret_cast<const i8vecu*>(p), fvec);
#endif
}

// Columns of D (a multiple of 16) in slices of kMax native vectors, then one slice of the rest:
// f.template operator()<NV>(d0) for each slice [d0, d0 + NV·kLanes).
template <int N, class F>
void slice_rest(int rest, int64_t d0, F& f) {
  if constexpr (N > 0) {
    if (rest == N)
      f.template operator()<N>(d0);
    else
      slice_rest<N - 1>(rest, d0, f);
  }
}
template <int kMax, class F>
void for_slices(int64_t D, F&& f) {
  int64_t d0 = 0;
  for (; d0 + kMax * kLanes <= D; d0 += kMax * kLanes) f.template operator()<kMax>(d0);
  slice_rest<kMax - 1>(static_cast<int>((D - d0) / kLanes), d0, f);
}

// Native vectors per slice of the row-times-matrix products: kTileRows x kRowVecs accumulators plus
// kRowVecs operands fit (AVX-512: 16 + 4 of 32 registers, 64 columns; AVX2: 8 + 2 of 16, 16 columns).
constexpr int kRowVecs = kRegs >= 32 ? 4 : 2;

// s[r][j] = alpha · Σ_d a[r][d] · bt[d][j] for r < kTileRows and j in [j0, j1), j1 − j0 a multiple of kCols.
// a [kTileRows, D] contiguous; bt [D, ldb] (keys or values transposed, zero-padded past S); s [kTileRows, lds].
// Two native vectors of columns at a time: 4 x 2 accumulators.
inline void tile_scores(const float* a, const float* bt, int64_t ldb, int64_t D, int64_t j0, int64_t j1, float alpha,
                        float* s, int64_t lds) {
  for (int64_t j = j0; j < j1; j += 2 * kLanes) {
    fvec c[kTileRows][2] = {};
    for (int64_t d = 0; d < D; ++d) {
      const fvec b0 = load(bt + d * ldb + j), b1 = load(bt + d * ldb + j + kLanes);
#pragma GCC unroll 4
      for (int r = 0; r < kTileRows; ++r) {
        const float ar = a[r * D + d];
        c[r][0] += ar * b0;
        c[r][1] += ar * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      store(s + r * lds + j, alpha * c[r][0]);
      store(s + r * lds + j + kLanes, alpha * c[r][1]);
    }
  }
}

// Columns [d0, d0 + NV·kLanes) of out[r] = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j]: p [kTileRows, ldp],
// b rows at b + j·ldb, out [kTileRows, D] contiguous (written).
template <int NV>
void tile_rows_times_mat_slice(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                               int64_t d0, int64_t D, float alpha, float* out) {
  fvec c[kTileRows][NV] = {};
  for (int64_t j = j0; j < j1; ++j) {
    fvec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load(b + j * ldb + d0 + kLanes * v);
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float pr = p[r * ldp + j];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[r][v] += pr * bv[v];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store(out + r * D + d0 + kLanes * v, alpha * c[r][v]);
}

// out[r][0, D) = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j][0, D) (P·V, dS·K), in slices of kRowVecs vectors.
inline void tile_rows_times_mat(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                                int64_t D, float alpha, float* out) {
  for_slices<kRowVecs>(D, [&]<int NV>(int64_t d0) {
    tile_rows_times_mat_slice<NV>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out);
  });
}

// Columns [d0, d0 + NV·kLanes) of acc[j] += alpha · Σ_r p[r][j] · a[r] for j in [j0, j1): p [kTileRows, ldp],
// a [kTileRows, D] contiguous, acc rows at acc + j·ldacc.
template <int NV>
void tile_mat_t_times_rows_slice(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t d0,
                                 int64_t D, float alpha, float* acc, int64_t ldacc) {
  fvec av[kTileRows][NV];
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) av[r][v] = alpha * load(a + r * D + d0 + kLanes * v);
  for (int64_t j = j0; j < j1; ++j) {
    float* row = acc + j * ldacc + d0;
    fvec c[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[v] = load(row + kLanes * v);
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float pr = p[r * ldp + j];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[v] += pr * av[r][v];
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store(row + kLanes * v, c[v]);
  }
}

// acc[j][0, D) += alpha · Σ_r p[r][j] · a[r][0, D) for j in [j0, j1) (dK += dSᵀ·Q, dV += Pᵀ·dO).
inline void tile_mat_t_times_rows(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t D,
                                  float alpha, float* acc, int64_t ldacc) {
  for_slices<kRowVecs>(D, [&]<int NV>(int64_t d0) {
    tile_mat_t_times_rows_slice<NV>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc);
  });
}

}  // namespace lathe::attn
