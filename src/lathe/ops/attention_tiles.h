// Register-blocked tile products of the attention kernels (attention.cc), for head dims D that are a
// multiple of 16. Written on GCC/Clang vector types: the layouts are in 16-float units (f32x16, kCols), the
// register tiles in the build's native vector (f32xN: 16 floats with AVX-512, 8 with AVX2), so that a
// tile's accumulators fit the register file of either (32 zmm, 16 ymm). A tile of kTileRows query rows
// keeps its accumulators in registers, with no packing of the operands. Every output sums its products
// in the same order whatever the vector width, so both builds give the same bits.
#pragma once

#include <cstdint>

namespace lathe::attn {

using f32x16 = float __attribute__((vector_size(64)));
// The same vector at any float address (unaligned moves; may alias the floats). Only references to it
// cross function boundaries: passing 64-byte vectors by value changes the ABI without AVX-512.
using f32x16u = float __attribute__((vector_size(64), aligned(4), may_alias));
constexpr int kTileRows = 4;   // query rows per tile
constexpr int64_t kCols = 32;  // key columns per score block: two 16-float vectors

// The native vector: on AVX2 a 16-float vector is two registers, and tiles of them spill (16 ymm hold 8
// accumulators of f32x16, no operands); in native vectors the same tiles fit.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kMaxSliceVecs = 4;  // 16 accumulators + 4 operands of 32 zmm
#else
constexpr int kLanes = 8;
constexpr int kMaxSliceVecs = 3;  // 12 accumulators + 3 operands + 1 broadcast of 16 ymm
#endif
using f32xN = float __attribute__((vector_size(kLanes * 4)));
using f32xNu = float __attribute__((vector_size(kLanes * 4), aligned(4), may_alias));

inline const f32x16u& vec_at(const float* p) { return *reinterpret_cast<const f32x16u*>(p); }
inline f32x16u& vec_at(float* p) { return *reinterpret_cast<f32x16u*>(p); }
inline const f32xNu& nvec_at(const float* p) { return *reinterpret_cast<const f32xNu*>(p); }
inline f32xNu& nvec_at(float* p) { return *reinterpret_cast<f32xNu*>(p); }

// s[r][j] = alpha · Σ_d a[r][d] · bt[d][j] for r < kTileRows and j in [j0, j1), j1 − j0 a multiple of kCols.
// a [kTileRows, D] contiguous; bt [D, ldb] (keys or values transposed, zero-padded past S); s [kTileRows, lds].
inline void tile_scores(const float* a, const float* bt, int64_t ldb, int64_t D, int64_t j0, int64_t j1, float alpha,
                        float* s, int64_t lds) {
  for (int64_t j = j0; j < j1; j += 2 * kLanes) {  // kCols divides j1 - j0 and is a multiple of 2 * kLanes
    f32xN c[kTileRows][2] = {};
    for (int64_t d = 0; d < D; ++d) {
      const f32xN b0 = nvec_at(bt + d * ldb + j), b1 = nvec_at(bt + d * ldb + j + kLanes);
#pragma GCC unroll 4
      for (int r = 0; r < kTileRows; ++r) {
        const float ar = a[r * D + d];
        c[r][0] += ar * b0;
        c[r][1] += ar * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      nvec_at(s + r * lds + j) = alpha * c[r][0];
      nvec_at(s + r * lds + j + kLanes) = alpha * c[r][1];
    }
  }
}

// Columns [d0, d0 + kLanes·NV) of out[r] = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j]: p [kTileRows, ldp],
// b rows at b + j·ldb, out [kTileRows, D] contiguous (written).
template <int NV>
void tile_rows_times_mat_slice(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                               int64_t d0, int64_t D, float alpha, float* out) {
  f32xN c[kTileRows][NV] = {};
  for (int64_t j = j0; j < j1; ++j) {
    f32xN bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = nvec_at(b + j * ldb + d0 + kLanes * v);
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
    for (int v = 0; v < NV; ++v) nvec_at(out + r * D + d0 + kLanes * v) = alpha * c[r][v];
}

// Splits [0, D) (a multiple of kLanes) into slices of up to kMaxSliceVecs native vectors for slice<NV>.
template <template <int> class Slice, class... Args>
inline void for_each_slice(int64_t D, Args... args) {
  int64_t d0 = 0;
  for (; d0 + kMaxSliceVecs * kLanes <= D; d0 += kMaxSliceVecs * kLanes) Slice<kMaxSliceVecs>::run(d0, args...);
  switch ((D - d0) / kLanes) {
    case 3: if constexpr (kMaxSliceVecs > 3) Slice<3>::run(d0, args...); break;
    case 2: Slice<2>::run(d0, args...); break;
    case 1: Slice<1>::run(d0, args...); break;
    default: break;
  }
}

template <int NV>
struct RowsTimesMatSlice {
  static void run(int64_t d0, const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                  int64_t D, float alpha, float* out) {
    tile_rows_times_mat_slice<NV>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out);
  }
};

// out[r][0, D) = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j][0, D) (P·V, dS·K), in slices of register width.
inline void tile_rows_times_mat(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                                int64_t D, float alpha, float* out) {
  for_each_slice<RowsTimesMatSlice>(D, p, ldp, b, ldb, j0, j1, D, alpha, out);
}

// Columns [d0, d0 + kLanes·NV) of acc[j] += alpha · Σ_r p[r][j] · a[r] for j in [j0, j1): p [kTileRows, ldp],
// a [kTileRows, D] contiguous, acc rows at acc + j·ldacc.
template <int NV>
void tile_mat_t_times_rows_slice(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t d0,
                                 int64_t D, float alpha, float* acc, int64_t ldacc) {
  f32xN av[kTileRows][NV];
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) av[r][v] = alpha * nvec_at(a + r * D + d0 + kLanes * v);
  for (int64_t j = j0; j < j1; ++j) {
    float* row = acc + j * ldacc + d0;
    f32xN c[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[v] = nvec_at(row + kLanes * v);
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float pr = p[r * ldp + j];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[v] += pr * av[r][v];
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) nvec_at(row + kLanes * v) = c[v];
  }
}

template <int NV>
struct MatTTimesRowsSlice {
  static void run(int64_t d0, const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t D,
                  float alpha, float* acc, int64_t ldacc) {
    tile_mat_t_times_rows_slice<NV>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc);
  }
};

// acc[j][0, D) += alpha · Σ_r p[r][j] · a[r][0, D) for j in [j0, j1) (dK += dSᵀ·Q, dV += Pᵀ·dO).
inline void tile_mat_t_times_rows(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t D,
                                  float alpha, float* acc, int64_t ldacc) {
  for_each_slice<MatTTimesRowsSlice>(D, p, ldp, a, j0, j1, D, alpha, acc, ldacc);
}

}  // namespace lathe::attn
