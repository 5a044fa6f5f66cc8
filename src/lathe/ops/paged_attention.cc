// paged_attention and paged_kv_write (ops/paged_attention.h). One task is a tile of query vectors:
// up to kTileQ (row, head) pairs of one sequence that share a KV head. The tile walks its sequence's
// visible blocks in order, keys read in place from the pool, with an online softmax per query vector:
// running max m, running sum l and unnormalised output acc, rescaled by exp(m_old − m_new) when m grows.
#include "lathe/ops/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "lathe/base/error.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

constexpr int kTileQ = 16;  // query vectors per tile

// How a sequence's rows and a KV head's query heads are cut into tiles.
struct TileShape {
  int heads;       // query heads per tile: the whole GQA group when it fits
  int head_parts;  // tiles across one group
  int rows;        // rows per tile
};

TileShape tile_shape(int group) {
  const int heads = std::min(group, kTileQ);
  return {heads, (group + heads - 1) / heads, std::max(1, kTileQ / heads)};
}

// Per-worker scratch, carved from PagedAttentionArgs::scratch.
struct Scratch {
  float* q;       // [kTileQ, D] the tile's queries, times the scale
  float* acc;     // [kTileQ, D] unnormalised outputs
  float* s;       // [kTileQ, P] one block's scores, then probabilities
  float* m;       // [kTileQ] running max
  float* l;       // [kTileQ] running sum
  int64_t* lo;    // [kTileQ] first visible key
  int64_t* hi;    // [kTileQ] one past the last visible key
};

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }  // keeps each part 64-byte aligned

Scratch carve(float* base, int64_t D, int64_t P) {
  Scratch w;
  w.q = base;
  w.acc = w.q + kTileQ * round16(D);
  w.s = w.acc + kTileQ * round16(D);
  w.m = w.s + kTileQ * round16(P);
  w.l = w.m + kTileQ;
  w.lo = reinterpret_cast<int64_t*>(w.l + kTileQ);
  w.hi = w.lo + kTileQ;
  return w;
}

struct Dims {
  int64_t H, Hkv, D, P, group;
  float scale, softcap;
  int64_t window;
  TileShape tile;
};

// One tile: rows [r0, r0 + nr) of sequence s, query heads [h0, h0 + nh) (all of KV head hk).
void attend_tile(const PagedAttentionArgs& a, const Dims& d, const Scratch& w, int64_t s, int64_t r0, int64_t nr,
                 int64_t h0, int64_t nh, int64_t hk) {
  const int64_t D = d.D, P = d.P, nq = nr * nh, ld_kv = d.Hkv * D;
  const std::span<const int32_t> table = a.block_tables[s];
  const int64_t ctx = a.context_lens[s];
  int64_t lo_min = ctx, hi_max = 0;
  for (int64_t r = 0; r < nr; ++r) {
    const int64_t pos = a.positions[r0 + r];
    const int64_t hi = std::min(pos + 1, ctx), lo = d.window > 0 ? std::max<int64_t>(0, pos - d.window + 1) : 0;
    lo_min = std::min(lo_min, lo);
    hi_max = std::max(hi_max, hi);
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t t = r * nh + hh;
      w.lo[t] = lo;
      w.hi[t] = hi;
      const float* src = a.q + ((r0 + r) * d.H + h0 + hh) * D;
      float* dst = w.q + t * D;
#pragma omp simd
      for (int64_t e = 0; e < D; ++e) dst[e] = src[e] * d.scale;
      w.m[t] = -std::numeric_limits<float>::infinity();
      w.l[t] = 0.f;
      std::fill(w.acc + t * D, w.acc + (t + 1) * D, 0.f);
    }
  }
  for (int64_t b = lo_min / P; b * P < hi_max; ++b) {
    const int64_t j0 = b * P, n = std::min(P, hi_max - j0);
    const float* kb = a.k_pool + (table[b] * P * d.Hkv + hk) * D;  // key j0 + jl at kb + jl·ld_kv
    const float* vb = a.v_pool + (table[b] * P * d.Hkv + hk) * D;
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t ja = std::max<int64_t>(w.lo[t] - j0, 0), je = std::min<int64_t>(w.hi[t] - j0, n);
      if (ja >= je) continue;  // this block is outside the vector's window or past its position
      float* st = w.s + t * P;
      const float* qt = w.q + t * D;
      float mb = -std::numeric_limits<float>::infinity();
      for (int64_t jl = ja; jl < je; ++jl) {
        const float* kj = kb + jl * ld_kv;
        float dot = 0.f;
#pragma omp simd reduction(+ : dot)
        for (int64_t e = 0; e < D; ++e) dot += qt[e] * kj[e];
        if (d.softcap > 0.f) dot = d.softcap * vec::tanh(dot * (1.f / d.softcap));
        st[jl] = dot;
        mb = std::max(mb, dot);
      }
      const float m_new = std::max(w.m[t], mb);
      const float corr = vec::exp(w.m[t] - m_new);  // 0 on the first block (m = −inf)
      w.m[t] = m_new;
      float* acc = w.acc + t * D;
      float sum = 0.f;
#pragma omp simd
      for (int64_t e = 0; e < D; ++e) acc[e] *= corr;
      for (int64_t jl = ja; jl < je; ++jl) {
        const float p = vec::exp(st[jl] - m_new);
        sum += p;
        const float* vj = vb + jl * ld_kv;
#pragma omp simd
        for (int64_t e = 0; e < D; ++e) acc[e] += p * vj[e];
      }
      w.l[t] = w.l[t] * corr + sum;
    }
  }
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t hh = 0; hh < nh; ++hh) {
      const int64_t t = r * nh + hh;
      const float inv = 1.f / w.l[t];
      const float* acc = w.acc + t * D;
      float* dst = a.out + ((r0 + r) * d.H + h0 + hh) * D;
#pragma omp simd
      for (int64_t e = 0; e < D; ++e) dst[e] = acc[e] * inv;
    }
}

}  // namespace

int64_t paged_attention_scratch_floats(int n_heads, int n_kv_heads, int head_dim, int block_size) {
  // q, acc, s, m, l and lo, hi (int64: two floats each), plus 16 for aligning the start.
  return kTileQ * (2 * round16(head_dim) + round16(block_size)) + 2 * kTileQ + 4 * kTileQ + 16;
}

void paged_kv_write(const PagedAttentionArgs& a, const float* k, const float* v, float* k_pool, float* v_pool) {
  const int64_t row = static_cast<int64_t>(a.n_kv_heads) * a.head_dim, P = a.block_size;
  for (int64_t s = 0; s < a.n_seqs; ++s)
    for (int64_t i = a.seq_starts[s]; i < a.seq_starts[s + 1]; ++i) {
      const int64_t pos = a.positions[i];
      const int64_t slot = static_cast<int64_t>(a.block_tables[s][pos / P]) * P + pos % P;
      std::memcpy(k_pool + slot * row, k + i * row, row * sizeof(float));
      std::memcpy(v_pool + slot * row, v + i * row, row * sizeof(float));
    }
}

void paged_attention(const PagedAttentionArgs& a, const AttentionOptions& opt, const ThreadPool& pool) {
  const int64_t group = a.n_heads / a.n_kv_heads;
  const Dims d{.H = a.n_heads, .Hkv = a.n_kv_heads, .D = a.head_dim, .P = a.block_size, .group = group,
               .scale = opt.scale != 0.f ? opt.scale : static_cast<float>(1.0 / std::sqrt(double(a.head_dim))),
               .softcap = opt.softcap, .window = opt.window, .tile = tile_shape(static_cast<int>(group))};
  // Tasks of sequence s: [task_starts[s], task_starts[s + 1]), ordered (row tile, KV head, head part).
  const int64_t per_row_tile = d.Hkv * d.tile.head_parts;
  a.task_starts[0] = 0;
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    const int64_t rows = a.seq_starts[s + 1] - a.seq_starts[s];
    a.task_starts[s + 1] = a.task_starts[s] + (rows + d.tile.rows - 1) / d.tile.rows * per_row_tile;
  }
  const int64_t n_tasks = a.task_starts[a.n_seqs];
  if (n_tasks == 0) return;
  const int64_t per_worker = paged_attention_scratch_floats(a.n_heads, a.n_kv_heads, a.head_dim, a.block_size);
  // Tasks differ in cost (context lengths differ): workers take the next one from a shared counter.
  std::atomic<int64_t> next{0};
  pool.run_on_workers(a.n_scratch_workers, [&](int worker, int) {
    float* base = a.scratch + worker * per_worker;
    base += (16 - reinterpret_cast<uintptr_t>(base) / sizeof(float) % 16) % 16;
    const Scratch w = carve(base, d.D, d.P);
    int64_t s = 0;
    for (int64_t task; (task = next.fetch_add(1, std::memory_order_relaxed)) < n_tasks;) {
      while (a.task_starts[s + 1] <= task) ++s;  // tasks are taken in increasing order per worker
      const int64_t local = task - a.task_starts[s];
      const int64_t row_tile = local / per_row_tile, hk = local % per_row_tile / d.tile.head_parts,
                    part = local % d.tile.head_parts;
      const int64_t r0 = a.seq_starts[s] + row_tile * d.tile.rows;
      const int64_t nr = std::min<int64_t>(d.tile.rows, a.seq_starts[s + 1] - r0);
      const int64_t h0 = hk * group + part * d.tile.heads;
      const int64_t nh = std::min<int64_t>(d.tile.heads, (hk + 1) * group - h0);
      attend_tile(a, d, w, s, r0, nr, h0, nh, hk);
    }
  });
}

}  // namespace lathe
