// Register-blocked tile products of the attention kernels (attention.cc), for head dims D that are a
// multiple of 16. Written on GCC/Clang vector types: 16 floats is one AVX-512 register (two AVX ones);
// a tile of kTileRows query rows keeps its accumulators in registers, with no packing of the operands.
#pragma once

#include <cstdint>

namespace lathe::attn {

using f32x16 = float __attribute__((vector_size(64)));
// The same vector at any float address (unaligned moves; may alias the floats). Only references to it
// cross function boundaries: passing 64-byte vectors by value changes the ABI without AVX-512.
using f32x16u = float __attribute__((vector_size(64), aligned(4), may_alias));
constexpr int kTileRows = 4;   // query rows per tile
constexpr int64_t kCols = 32;  // key columns per score block: two vectors

inline const f32x16u& vec_at(const float* p) { return *reinterpret_cast<const f32x16u*>(p); }
inline f32x16u& vec_at(float* p) { return *reinterpret_cast<f32x16u*>(p); }

// s[r][j] = alpha · Σ_d a[r][d] · bt[d][j] for r < kTileRows and j in [j0, j1), j1 − j0 a multiple of kCols.
// a [kTileRows, D] contiguous; bt [D, ldb] (keys or values transposed, zero-padded past S); s [kTileRows, lds].
inline void tile_scores(const float* a, const float* bt, int64_t ldb, int64_t D, int64_t j0, int64_t j1, float alpha,
                        float* s, int64_t lds) {
  for (int64_t j = j0; j < j1; j += kCols) {
    f32x16 c[kTileRows][2] = {};
    for (int64_t d = 0; d < D; ++d) {
      const f32x16 b0 = vec_at(bt + d * ldb + j), b1 = vec_at(bt + d * ldb + j + 16);
#pragma GCC unroll 4
      for (int r = 0; r < kTileRows; ++r) {
        const float ar = a[r * D + d];
        c[r][0] += ar * b0;
        c[r][1] += ar * b1;
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      vec_at(s + r * lds + j) = alpha * c[r][0];
      vec_at(s + r * lds + j + 16) = alpha * c[r][1];
    }
  }
}

// Columns [d0, d0 + 16·NV) of out[r] = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j]: p [kTileRows, ldp],
// b rows at b + j·ldb, out [kTileRows, D] contiguous (written).
template <int NV>
void tile_rows_times_mat_slice(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                               int64_t d0, int64_t D, float alpha, float* out) {
  f32x16 c[kTileRows][NV] = {};
  for (int64_t j = j0; j < j1; ++j) {
    f32x16 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = vec_at(b + j * ldb + d0 + 16 * v);
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
    for (int v = 0; v < NV; ++v) vec_at(out + r * D + d0 + 16 * v) = alpha * c[r][v];
}

// out[r][0, D) = alpha · Σ_{j in [j0, j1)} p[r][j] · b[j][0, D) (P·V, dS·K), in slices of up to 64 columns.
inline void tile_rows_times_mat(const float* p, int64_t ldp, const float* b, int64_t ldb, int64_t j0, int64_t j1,
                                int64_t D, float alpha, float* out) {
  int64_t d0 = 0;
  for (; d0 + 64 <= D; d0 += 64) tile_rows_times_mat_slice<4>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out);
  switch ((D - d0) / 16) {
    case 3: tile_rows_times_mat_slice<3>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out); break;
    case 2: tile_rows_times_mat_slice<2>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out); break;
    case 1: tile_rows_times_mat_slice<1>(p, ldp, b, ldb, j0, j1, d0, D, alpha, out); break;
    default: break;
  }
}

// Columns [d0, d0 + 16·NV) of acc[j] += alpha · Σ_r p[r][j] · a[r] for j in [j0, j1): p [kTileRows, ldp],
// a [kTileRows, D] contiguous, acc rows at acc + j·ldacc.
template <int NV>
void tile_mat_t_times_rows_slice(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t d0,
                                 int64_t D, float alpha, float* acc, int64_t ldacc) {
  f32x16 av[kTileRows][NV];
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) av[r][v] = alpha * vec_at(a + r * D + d0 + 16 * v);
  for (int64_t j = j0; j < j1; ++j) {
    float* row = acc + j * ldacc + d0;
    f32x16 c[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[v] = vec_at(row + 16 * v);
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float pr = p[r * ldp + j];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[v] += pr * av[r][v];
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) vec_at(row + 16 * v) = c[v];
  }
}

// acc[j][0, D) += alpha · Σ_r p[r][j] · a[r][0, D) for j in [j0, j1) (dK += dSᵀ·Q, dV += Pᵀ·dO).
inline void tile_mat_t_times_rows(const float* p, int64_t ldp, const float* a, int64_t j0, int64_t j1, int64_t D,
                                  float alpha, float* acc, int64_t ldacc) {
  int64_t d0 = 0;
  for (; d0 + 64 <= D; d0 += 64) tile_mat_t_times_rows_slice<4>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc);
  switch ((D - d0) / 16) {
    case 3: tile_mat_t_times_rows_slice<3>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc); break;
    case 2: tile_mat_t_times_rows_slice<2>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc); break;
    case 1: tile_mat_t_times_rows_slice<1>(p, ldp, a, j0, j1, d0, D, alpha, acc, ldacc); break;
    default: break;
  }
}

}  // namespace lathe::attn
