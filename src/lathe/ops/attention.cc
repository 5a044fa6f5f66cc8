// scaled_dot_product_attention front, CPU kernels and gradient, plus the decode kernel. Work is split per
// (batch, head) and in blocks of query rows over only the keys those rows can see (causal / window), so
// memory is O(rows·S) per worker and causal work ~halves. Head dims that are a multiple of 16 run
// register-blocked tiles of 4 rows (attention_tiles.h); others run GEMMs over blocks of kRowBlock rows,
// whose packing cost as much as the products at these small shapes.
#include "lathe/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/base/context.h"
#include "lathe/ops/attention_tiles.h"
#include "lathe/ops/parallel_rows.h"
#include "lathe/ops/pool_tasks.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

constexpr int64_t kRowBlock = 64;  // query rows per score GEMM: 64·S floats of scratch per buffer

struct AttnDims {
  int64_t n_batch, n_q, n_kv, n_heads, n_kv_heads, head_dim, group;
  float scale, softcap;
  bool causal;
  int64_t window, q_offset;
  const int32_t* key_start = nullptr;  // [B, T] first visible key per query (document masking), or null
};

// Keys [lo, hi) visible from query row i of batch row b. Both ends are non-decreasing in i.
inline void key_range(const AttnDims& a, int64_t b, int64_t i, int64_t* lo, int64_t* hi) {
  if (!a.causal) {
    *lo = 0;
    *hi = a.n_kv;
  } else {
    const int64_t qpos = a.q_offset + i;
    *hi = std::min(qpos + 1, a.n_kv);
    *lo = a.window > 0 ? std::max<int64_t>(0, qpos - a.window + 1) : 0;
  }
  if (a.key_start) *lo = std::max<int64_t>(*lo, a.key_start[b * a.n_q + i]);
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, float beta, const ThreadPool& pool) {
  cpu::gemm(cpu::GemmArgs<float, float>{trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta}, pool);
}

// Softcap in place on row[a, e): x -> cap·tanh(x / cap); keeps tanh in th[a, e) for the gradient.
void softcap_row(float* row, float* th, int64_t a, int64_t e, float cap) {
  const float inv_cap = 1.f / cap;  // HF divides; x·(1/cap) differs by <= 1 ulp before a 5-ulp tanh
  if (th) {
#pragma omp simd
    for (int64_t j = a; j < e; ++j) {
      th[j] = vec::tanh(row[j] * inv_cap);
      row[j] = cap * th[j];
    }
  } else {
#pragma omp simd
    for (int64_t j = a; j < e; ++j) row[j] = cap * vec::tanh(row[j] * inv_cap);
  }
}

// row[0, n) <- softmax over [a, e), zero elsewhere; returns the log-sum-exp.
float softmax_row(float* row, int64_t n, int64_t a, int64_t e) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = a; j < e; ++j) mx = mx > row[j] ? mx : row[j];  // the ternary vectorises; std::max did not
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = a; j < e; ++j) {
    row[j] = vec::exp(row[j] - mx);
    sum += row[j];
  }
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t j = a; j < e; ++j) row[j] *= inv;
  std::fill(row, row + a, 0.f);
  std::fill(row + e, row + n, 0.f);
  return mx + std::log(sum);
}

// out [B, T, H, D] and lse [B, H, T] from contiguous q, k, v.
void attention_forward_gemm(const AttnDims& a, const float* q, const float* k, const float* v, float* out, float* lse) {
  const int64_t T = a.n_q, S = a.n_kv, H = a.n_heads, Hkv = a.n_kv_heads, D = a.head_dim;
  const int n_workers = current_context().pool.n_threads();
  std::vector<float> scratch(static_cast<size_t>(n_workers) * kRowBlock * S);
  run_tasks(a.n_batch * H, [&](int64_t task, int worker, const ThreadPool& gp) {
    const int64_t b = task / H, h = task % H, hk = h / a.group;
    const float* qb = q + (b * T * H + h) * D;  // row i at qb + i·H·D
    const float* kb = k + (b * S * Hkv + hk) * D;
    const float* vb = v + (b * S * Hkv + hk) * D;
    float* ob = out + (b * T * H + h) * D;
    float* p = scratch.data() + worker * kRowBlock * S;
    for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
      const int64_t m = std::min(kRowBlock, T - i0);
      int64_t lo, hi, unused;
      key_range(a, b, i0, &lo, &unused);
      key_range(a, b, i0 + m - 1, &unused, &hi);
      const int64_t n = hi - lo;
      gemm_f32(false, true, m, n, D, qb + i0 * H * D, H * D, kb + lo * Hkv * D, Hkv * D, p, n, a.scale, 0.f, gp);
      for (int64_t r = 0; r < m; ++r) {
        int64_t lo_r, hi_r;
        key_range(a, b, i0 + r, &lo_r, &hi_r);
        float* row = p + r * n;
        if (a.softcap > 0.f) softcap_row(row, nullptr, lo_r - lo, hi_r - lo, a.softcap);
        lse[(b * H + h) * T + i0 + r] = softmax_row(row, n, lo_r - lo, hi_r - lo);
      }
      gemm_f32(false, false, m, D, n, p, n, vb + lo * Hkv * D, Hkv * D, ob + i0 * H * D, H * D, 1.f, 0.f, gp);
    }
  });
}

struct AttnGrads {
  float *dq, *dk, *dv;  // dq [B, T, H, D] written; dk, dv [B, S, Hkv, D] accumulated (zeroed by caller)
};

// Flash-attention backward with recomputed probabilities: P = exp(s − lse), dP = dO·Vᵀ,
// dS = P ⊙ (dP − rowsum(dO ⊙ O)) [· (1 − tanh²) under softcap], dQ = scale·dS·K, dK += scale·dSᵀ·Q,
// dV += Pᵀ·dO. One task per (batch, kv head) owns that head's dK/dV rows, so GQA needs no reduction.
void attention_backward_gemm(const AttnDims& a, const float* q, const float* k, const float* v, const float* out,
                             const float* lse, const float* dout, const AttnGrads& g) {
  const int64_t T = a.n_q, S = a.n_kv, H = a.n_heads, Hkv = a.n_kv_heads, D = a.head_dim;
  const int n_workers = current_context().pool.n_threads();
  const int64_t per_worker = 3 * kRowBlock * S;
  std::vector<float> scratch(static_cast<size_t>(n_workers) * per_worker);
  run_tasks(a.n_batch * Hkv, [&](int64_t task, int worker, const ThreadPool& gp) {
    const int64_t b = task / Hkv, hk = task % Hkv;
    const float* kb = k + (b * S * Hkv + hk) * D;
    const float* vb = v + (b * S * Hkv + hk) * D;
    float* dkb = g.dk ? g.dk + (b * S * Hkv + hk) * D : nullptr;
    float* dvb = g.dv ? g.dv + (b * S * Hkv + hk) * D : nullptr;
    float* p = scratch.data() + worker * per_worker;
    float* ds = p + kRowBlock * S;
    float* th = ds + kRowBlock * S;
    for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
      const int64_t row0 = b * T * H + h;  // element offset of (b, 0, h, 0) is row0 · D
      const float *qb = q + row0 * D, *ob = out + row0 * D, *dob = dout + row0 * D;
      const float* lse_bh = lse + (b * H + h) * T;
      for (int64_t i0 = 0; i0 < T; i0 += kRowBlock) {
        const int64_t m = std::min(kRowBlock, T - i0);
        int64_t lo, hi, unused;
        key_range(a, b, i0, &lo, &unused);
        key_range(a, b, i0 + m - 1, &unused, &hi);
        const int64_t n = hi - lo;
        gemm_f32(false, true, m, n, D, qb + i0 * H * D, H * D, kb + lo * Hkv * D, Hkv * D, p, n, a.scale, 0.f, gp);
        gemm_f32(false, true, m, n, D, dob + i0 * H * D, H * D, vb + lo * Hkv * D, Hkv * D, ds, n, 1.f, 0.f, gp);
        for (int64_t r = 0; r < m; ++r) {
          int64_t lo_r, hi_r;
          key_range(a, b, i0 + r, &lo_r, &hi_r);
          const int64_t ja = lo_r - lo, je = hi_r - lo;
          float *prow = p + r * n, *dsrow = ds + r * n, *trow = th + r * n;
          if (a.softcap > 0.f) softcap_row(prow, trow, ja, je, a.softcap);
          const float l = lse_bh[i0 + r];
          const float* o_i = ob + (i0 + r) * H * D;
          const float* do_i = dob + (i0 + r) * H * D;
          float di = 0.f;
#pragma omp simd reduction(+ : di)
          for (int64_t d = 0; d < D; ++d) di += do_i[d] * o_i[d];
#pragma omp simd
          for (int64_t j = ja; j < je; ++j) {
            prow[j] = vec::exp(prow[j] - l);
            dsrow[j] = prow[j] * (dsrow[j] - di);
          }
          if (a.softcap > 0.f) {
#pragma omp simd
            for (int64_t j = ja; j < je; ++j) dsrow[j] *= 1.f - trow[j] * trow[j];
          }
          std::fill(prow, prow + ja, 0.f);
          std::fill(prow + je, prow + n, 0.f);
          std::fill(dsrow, dsrow + ja, 0.f);
          std::fill(dsrow + je, dsrow + n, 0.f);
        }
        if (g.dq)
          gemm_f32(false, false, m, D, n, ds, n, kb + lo * Hkv * D, Hkv * D, g.dq + row0 * D + i0 * H * D, H * D,
                   a.scale, 0.f, gp);
        if (dkb)
          gemm_f32(true, false, n, D, m, ds, n, qb + i0 * H * D, H * D, dkb + lo * Hkv * D, Hkv * D, a.scale, 1.f, gp);
        if (dvb) gemm_f32(true, false, n, D, m, p, n, dob + i0 * H * D, H * D, dvb + lo * Hkv * D, Hkv * D, 1.f, 1.f, gp);
      }
    }
  });
}

// Keys [lo, hi) visible from some row of [i0, i0 + m).
void block_key_range(const AttnDims& a, int64_t b, int64_t i0, int64_t m, int64_t* lo, int64_t* hi) {
  int64_t unused;
  key_range(a, b, i0, lo, &unused);
  key_range(a, b, i0 + m - 1, &unused, hi);
}

// tile [kTileRows, D] = rows [i0, i0 + m) of one head (row stride ld), zero past m; also prefetches the
// next tile's rows, which sit H·D floats apart (too far for the hardware prefetcher to follow).
void load_tile(const float* src, int64_t ld, int64_t i0, int64_t m, int64_t n_rows, int64_t D, float* tile) {
  for (int64_t r = i0 + attn::kTileRows; r < std::min(n_rows, i0 + 2 * attn::kTileRows); ++r)
    for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(src + r * ld + d);
  for (int64_t r = 0; r < attn::kTileRows; ++r) {
    if (r < m)
      std::memcpy(tile + r * D, src + (i0 + r) * ld, D * sizeof(float));
    else
      std::fill(tile + r * D, tile + (r + 1) * D, 0.f);
  }
}

// Rows [i0, i0 + m) of one head (row stride ld) = the first m rows of tile [kTileRows, D].
void store_tile(const float* tile, int64_t m, int64_t D, float* dst, int64_t ld, int64_t i0) {
  for (int64_t r = 0; r < m; ++r) std::memcpy(dst + (i0 + r) * ld, tile + r * D, D * sizeof(float));
}

// Row stride of a transposed head [D, S]: S rounded up to whole kCols blocks, plus 16 floats so that
// the D rows a score block reads do not all map to the same few L1 sets (a 1 KiB stride at S = 256 did).
int64_t transposed_stride(int64_t S) { return (S + attn::kCols - 1) / attn::kCols * attn::kCols + 16; }

// dst [D, ldt] = one head's rows [0, S) (row stride ld) transposed, zero in columns [S, ldt). In 16 x 16
// blocks: a plain column walk misses L1 on every element (strides of whole KiB alias in the sets).
void transpose_head(const float* src, int64_t ld, int64_t S, int64_t D, float* dst, int64_t ldt) {
  constexpr int64_t kB = 16;
  for (int64_t j0 = 0; j0 < S; j0 += kB) {
    const int64_t je = std::min(S, j0 + kB);
    for (int64_t d0 = 0; d0 < D; d0 += kB) {
      const int64_t de = std::min(D, d0 + kB);
      for (int64_t d = d0; d < de; ++d)
        for (int64_t j = j0; j < je; ++j) dst[d * ldt + j] = src[j * ld + d];
    }
  }
  for (int64_t d = 0; d < D; ++d) std::fill(dst + d * ldt + S, dst + (d + 1) * ldt, 0.f);
}

// Score columns: [j0, j1) covers [lo, hi) in whole kCols blocks (within ldt, which has room for them).
void score_columns(int64_t lo, int64_t hi, int64_t* j0, int64_t* j1) {
  *j0 = lo / attn::kCols * attn::kCols;
  *j1 = (hi + attn::kCols - 1) / attn::kCols * attn::kCols;
}

// As attention_forward_gemm, for D % 16 == 0: per (batch, head), tiles of kTileRows query rows against
// the head's keys transposed once ([D, S] padded to kCols), scores [kTileRows, S] per worker.
void attention_forward_tiled(const AttnDims& a, const float* q, const float* k, const float* v, float* out,
                             float* lse) {
  constexpr int64_t R = attn::kTileRows;
  const int64_t T = a.n_q, S = a.n_kv, H = a.n_heads, Hkv = a.n_kv_heads, D = a.head_dim;
  const int64_t ldt = transposed_stride(S);
  const ThreadPool& pool = current_context().pool;
  const int64_t per_worker = D * ldt + R * ldt + 2 * R * D;
  std::vector<float> scratch(static_cast<size_t>(pool.n_threads()) * per_worker);
  pool.parallel_for(a.n_batch * H, [&](int64_t task, int worker) {
    const int64_t b = task / H, h = task % H, hk = h / a.group;
    const float* qb = q + (b * T * H + h) * D;  // row i at qb + i·H·D
    const float* vb = v + (b * S * Hkv + hk) * D;
    float* ob = out + (b * T * H + h) * D;
    float* kt = scratch.data() + worker * per_worker;  // [D, ldt]
    float* s = kt + D * ldt;                            // [R, ldt]
    float* qt = s + R * ldt;                            // [R, D]
    float* ot = qt + R * D;                             // [R, D]
    transpose_head(k + (b * S * Hkv + hk) * D, Hkv * D, S, D, kt, ldt);
    for (int64_t i0 = 0; i0 < T; i0 += R) {
      const int64_t m = std::min(R, T - i0);
      int64_t lo, hi, j0, j1;
      block_key_range(a, b, i0, m, &lo, &hi);
      score_columns(lo, hi, &j0, &j1);
      load_tile(qb, H * D, i0, m, T, D, qt);
      attn::tile_scores(qt, kt, ldt, D, j0, j1, a.scale, s, ldt);
      for (int64_t r = 0; r < R; ++r) {
        float* row = s + r * ldt;
        if (r >= m) {  // padding rows: zero probabilities
          std::fill(row + j0, row + j1, 0.f);
          continue;
        }
        int64_t lo_r, hi_r;
        key_range(a, b, i0 + r, &lo_r, &hi_r);
        if (a.softcap > 0.f) softcap_row(row, nullptr, lo_r, hi_r, a.softcap);
        lse[(b * H + h) * T + i0 + r] = softmax_row(row + j0, j1 - j0, lo_r - j0, hi_r - j0);
      }
      attn::tile_rows_times_mat(s, ldt, vb, Hkv * D, lo, hi, D, 1.f, ot);
      store_tile(ot, m, D, ob, H * D, i0);
    }
  });
}

// As attention_backward_gemm, for D % 16 == 0, with the tiles of attention_forward_tiled; K and V of the
// task's kv head are transposed once for the QKᵀ and dO·Vᵀ products.
void attention_backward_tiled(const AttnDims& a, const float* q, const float* k, const float* v, const float* out,
                              const float* lse, const float* dout, const AttnGrads& g) {
  constexpr int64_t R = attn::kTileRows;
  const int64_t T = a.n_q, S = a.n_kv, H = a.n_heads, Hkv = a.n_kv_heads, D = a.head_dim;
  const int64_t ldt = transposed_stride(S);
  const ThreadPool& pool = current_context().pool;
  const int64_t per_worker = 2 * D * ldt + 3 * R * ldt + 3 * R * D;
  std::vector<float> scratch(static_cast<size_t>(pool.n_threads()) * per_worker);
  // delta [B, T, H] = rowsum(dO ⊙ O), in one sequential pass (inside the tiles these rows were cache misses).
  std::vector<float> delta(static_cast<size_t>(a.n_batch * T * H));
  parallel_rows(a.n_batch * T * H, D, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float *o_i = out + i * D, *do_i = dout + i * D;
      float di = 0.f;
#pragma omp simd reduction(+ : di)
      for (int64_t d = 0; d < D; ++d) di += do_i[d] * o_i[d];
      delta[i] = di;
    }
  });
  pool.parallel_for(a.n_batch * Hkv, [&](int64_t task, int worker) {
    const int64_t b = task / Hkv, hk = task % Hkv;
    const float* kb = k + (b * S * Hkv + hk) * D;
    const float* vb = v + (b * S * Hkv + hk) * D;
    float* dkb = g.dk ? g.dk + (b * S * Hkv + hk) * D : nullptr;
    float* dvb = g.dv ? g.dv + (b * S * Hkv + hk) * D : nullptr;
    float* kt = scratch.data() + worker * per_worker;  // [D, ldt]
    float* vt = kt + D * ldt;                           // [D, ldt]
    float* p = vt + D * ldt;                            // [R, ldt] probabilities
    float* ds = p + R * ldt;                            // [R, ldt] dO·Vᵀ, then dS
    float* th = ds + R * ldt;                           // [R, ldt] tanh under softcap
    float* qt = th + R * ldt;                           // [R, D]
    float* dot = qt + R * D;                            // [R, D]
    float* dqt = dot + R * D;                           // [R, D]
    transpose_head(kb, Hkv * D, S, D, kt, ldt);
    transpose_head(vb, Hkv * D, S, D, vt, ldt);
    for (int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
      const int64_t row0 = b * T * H + h;  // element offset of (b, 0, h, 0) is row0 · D
      const float *qb = q + row0 * D, *dob = dout + row0 * D;
      const float* lse_bh = lse + (b * H + h) * T;
      for (int64_t i0 = 0; i0 < T; i0 += R) {
        const int64_t m = std::min(R, T - i0);
        int64_t lo, hi, j0, j1;
        block_key_range(a, b, i0, m, &lo, &hi);
        score_columns(lo, hi, &j0, &j1);
        load_tile(qb, H * D, i0, m, T, D, qt);
        load_tile(dob, H * D, i0, m, T, D, dot);
        attn::tile_scores(qt, kt, ldt, D, j0, j1, a.scale, p, ldt);
        attn::tile_scores(dot, vt, ldt, D, j0, j1, 1.f, ds, ldt);
        for (int64_t r = 0; r < R; ++r) {
          float *prow = p + r * ldt, *dsrow = ds + r * ldt, *trow = th + r * ldt;
          if (r >= m) {
            std::fill(prow + j0, prow + j1, 0.f);
            std::fill(dsrow + j0, dsrow + j1, 0.f);
            continue;
          }
          int64_t ja, je;
          key_range(a, b, i0 + r, &ja, &je);
          if (a.softcap > 0.f) softcap_row(prow, trow, ja, je, a.softcap);
          const float l = lse_bh[i0 + r], di = delta[(b * T + i0 + r) * H + h];
#pragma omp simd
          for (int64_t j = ja; j < je; ++j) {
            prow[j] = vec::exp(prow[j] - l);
            dsrow[j] = prow[j] * (dsrow[j] - di);
          }
          if (a.softcap > 0.f) {
#pragma omp simd
            for (int64_t j = ja; j < je; ++j) dsrow[j] *= 1.f - trow[j] * trow[j];
          }
          std::fill(prow + j0, prow + ja, 0.f);
          std::fill(prow + je, prow + j1, 0.f);
          std::fill(dsrow + j0, dsrow + ja, 0.f);
          std::fill(dsrow + je, dsrow + j1, 0.f);
        }
        if (g.dq) {
          attn::tile_rows_times_mat(ds, ldt, kb, Hkv * D, lo, hi, D, a.scale, dqt);
          store_tile(dqt, m, D, g.dq + row0 * D, H * D, i0);
        }
        if (dkb) attn::tile_mat_t_times_rows(ds, ldt, qt, lo, hi, D, a.scale, dkb, Hkv * D);
        if (dvb) attn::tile_mat_t_times_rows(p, ldt, dot, lo, hi, D, 1.f, dvb, Hkv * D);
      }
    }
  });
}

bool use_tiles(const AttnDims& a) { return a.head_dim % 16 == 0; }

void attention_forward(const AttnDims& a, const float* q, const float* k, const float* v, float* out, float* lse) {
  if (use_tiles(a))
    attention_forward_tiled(a, q, k, v, out, lse);
  else
    attention_forward_gemm(a, q, k, v, out, lse);
}

void attention_backward(const AttnDims& a, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, const float* dout, const AttnGrads& g) {
  if (use_tiles(a))
    attention_backward_tiled(a, q, k, v, out, lse, dout, g);
  else
    attention_backward_gemm(a, q, k, v, out, lse, dout, g);
}

float default_scale(const AttentionOptions& opt, int64_t head_dim) {
  return opt.scale != 0.f ? opt.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const AttentionOptions& opt) {
  LATHE_CHECK_ARG(q_in.dim() == 4 && k_in.dim() == 4 && v_in.dim() == 4,
                  "[scaled_dot_product_attention] q, k, v must be 4-D [B, T, H, D], got ", shape_str(q_in.shape()), ", ",
                  shape_str(k_in.shape()), ", ", shape_str(v_in.shape()));
  LATHE_CHECK_ARG(q_in.dtype() == DType::kF32 && k_in.dtype() == DType::kF32 && v_in.dtype() == DType::kF32,
                  "[scaled_dot_product_attention] q, k, v must be f32");
  LATHE_CHECK_ARG(k_in.shape() == v_in.shape() && k_in.size(0) == q_in.size(0) && k_in.size(3) == q_in.size(3),
                  "[scaled_dot_product_attention] q ", shape_str(q_in.shape()), " k ", shape_str(k_in.shape()), " v ",
                  shape_str(v_in.shape()), " do not match: need k = v = [B, S, Hkv, D]");
  const int64_t n_heads = q_in.size(2), n_kv_heads = k_in.size(2);
  LATHE_CHECK_ARG(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "[scaled_dot_product_attention] H = ", n_heads,
                  " is not a multiple of Hkv = ", n_kv_heads);
  const int64_t n_q = q_in.size(1), n_kv = k_in.size(1);
  LATHE_CHECK_ARG(n_kv >= 1, "[scaled_dot_product_attention] needs at least one key");
  LATHE_CHECK_ARG(opt.window >= 0 && opt.softcap >= 0.f && opt.q_offset >= 0,
                  "[scaled_dot_product_attention] window, softcap and q_offset must be >= 0");
  LATHE_CHECK_ARG(opt.window == 0 || opt.causal, "[scaled_dot_product_attention] a sliding window needs causal");
  LATHE_CHECK_ARG(!opt.causal || opt.q_offset + n_q <= n_kv, "[scaled_dot_product_attention] causal queries at ",
                  opt.q_offset, "..", opt.q_offset + n_q - 1, " need keys up to there, S = ", n_kv);
  const Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  Tensor key_start;
  if (opt.key_start.defined()) {
    LATHE_CHECK_ARG(opt.causal && opt.key_start.dtype() == DType::kI32 && opt.key_start.dim() == 2 &&
                        opt.key_start.size(0) == q.size(0) && opt.key_start.size(1) == n_q,
                    "[scaled_dot_product_attention] key_start must be int32 [B, T] = [", q.size(0), ", ", n_q,
                    "] with causal attention, got ", shape_str(opt.key_start.shape()));
    key_start = opt.key_start.contiguous();
    const int32_t* ks = key_start.data<int32_t>();
    for (int64_t b = 0; b < q.size(0); ++b)
      for (int64_t i = 0; i < n_q; ++i) {
        const int32_t v0 = ks[b * n_q + i];
        LATHE_CHECK_ARG(v0 >= 0 && v0 <= opt.q_offset + i && (i == 0 || v0 >= ks[b * n_q + i - 1]),
                        "[scaled_dot_product_attention] key_start[", b, ", ", i, "] = ", v0,
                        ": must be non-decreasing along the row and at most the query's position");
      }
  }
  const AttnDims dims{.n_batch = q.size(0), .n_q = n_q, .n_kv = n_kv, .n_heads = n_heads, .n_kv_heads = n_kv_heads,
                      .head_dim = q.size(3), .group = n_heads / n_kv_heads, .scale = default_scale(opt, q.size(3)),
                      .softcap = opt.softcap, .causal = opt.causal, .window = opt.window, .q_offset = opt.q_offset,
                      .key_start = key_start.defined() ? key_start.data<int32_t>() : nullptr};
  Tensor out = Tensor::empty(q.shape());
  Tensor lse = Tensor::empty({dims.n_batch, n_heads, n_q});
  attention_forward(dims, q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(), lse.data<float>());

  if (needs_grad({&q_in, &k_in, &v_in})) {
    const bool want_q = q_in.requires_grad(), want_k = k_in.requires_grad(), want_v = v_in.requires_grad();
    Tensor qs = q.detach(), ks = k.detach(), vs = v.detach(), os = out.detach();
    // dims.key_start points into key_start: the lambda's copy keeps it alive.
    record(out, "scaled_dot_product_attention", {q_in, k_in, v_in},
           [=](const Tensor& g_in) -> std::vector<Tensor> {
             (void)key_start;
             const Tensor g = g_in.contiguous();  // [B, T, H, D]
             Tensor dq = want_q ? Tensor::empty(qs.shape()) : Tensor();
             Tensor dk = want_k ? Tensor::zeros(ks.shape()) : Tensor();
             Tensor dv = want_v ? Tensor::zeros(vs.shape()) : Tensor();
             attention_backward(dims, qs.data<float>(), ks.data<float>(), vs.data<float>(), os.data<float>(),
                                lse.data<float>(), g.data<float>(),
                                {want_q ? dq.data<float>() : nullptr, want_k ? dk.data<float>() : nullptr,
                                 want_v ? dv.data<float>() : nullptr});
             return {dq, dk, dv};
           });
  }
  return out;
}

}  // namespace lathe
