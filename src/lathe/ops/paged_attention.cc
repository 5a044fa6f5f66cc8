// paged_attention and paged_kv_write (ops/paged_attention.h). One task is a tile of query vectors:
// up to kTileQ (row, head) pairs of one sequence that share a KV head. The tile walks its sequence's
// visible blocks in order, keys read in place from the pool, with an online softmax per query vector:
// running max m, running sum l and unnormalised output acc, rescaled by exp(m_old − m_new) when m grows.
// Every kernel is templated on the pool's element type T (float, bf16 or int8_t): bf16 keys and values and
// int8 codes are widened to f32 as they are loaded (attn::load), so all pools run the same arithmetic; an
// int8 pool's scores are then multiplied by their keys' scales, and its probabilities by their values'
// scales before the P·V sum (the sums of l keep the unscaled probabilities).
#include "lathe/ops/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "lathe/base/error.h"
#include "lathe/ops/attention_tiles.h"
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
  float* kw;      // [P, D] a bf16 or int8 block's keys widened (the wide tile; not for f32 pools)
  float* vw;      // [P, D] its values widened
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
  w.kw = reinterpret_cast<float*>(w.hi + kTileQ);
  w.vw = w.kw + P * round16(D);
  return w;
}

struct Dims {
  int64_t H, Hkv, D, P, group;
  float scale, softcap;
  int64_t window;
  TileShape tile;
};

// One pool element as f32 (the any-D kernels; the vector kernels widen whole vectors with attn::load).
inline float widen(float x) { return x; }
inline float widen(bf16 x) { return bf16_to_f32(x); }
inline float widen(int8_t x) { return static_cast<float>(x); }

template <class T>
constexpr bool kScaled = std::is_same_v<T, int8_t>;  // an int8 pool: codes times per-slot scales

// ---- One query vector against keys [ja, je) of one block (key jl at kb + jl·ld). ----

// Any D: st[jl] = q·k_jl.
template <class T>
void scores_any(const float* q, const T* kb, int64_t ld, int64_t D, int64_t ja, int64_t je, float* st) {
  for (int64_t jl = ja; jl < je; ++jl) {
    const T* kj = kb + jl * ld;
    float dot = 0.f;
#pragma omp simd reduction(+ : dot)
    for (int64_t e = 0; e < D; ++e) dot += q[e] * widen(kj[e]);
    st[jl] = dot;
  }
}

// Any D: acc = corr·acc + Σ_jl p[jl]·v_jl.
template <class T>
void pv_any(float* acc, const float* p, const T* vb, int64_t ld, int64_t D, int64_t ja, int64_t je, float corr) {
#pragma omp simd
  for (int64_t e = 0; e < D; ++e) acc[e] *= corr;
  for (int64_t jl = ja; jl < je; ++jl) {
    const float pj = p[jl];
    const T* vj = vb + jl * ld;
#pragma omp simd
    for (int64_t e = 0; e < D; ++e) acc[e] += pj * widen(vj[e]);
  }
}

// Lane i of fold<W>(x, y) sums two lanes W apart within its group of 2W lanes: the first W lanes of a
// group from x, the last W from y. Lanes of x are 0 .. kLanes − 1 in the shuffle's numbering, y's follow.
template <int W>
constexpr int fold_lane(int i, bool upper) {
  const int group = i / (2 * W) * (2 * W), o = i % (2 * W);
  return (o < W ? group + o : attn::kLanes + group + o - W) + (upper ? W : 0);
}
template <int W, int... I>
inline attn::fvec fold(const attn::fvec& x, const attn::fvec& y, std::integer_sequence<int, I...>) {
  return __builtin_shufflevector(x, y, fold_lane<W>(I, false)...) +
         __builtin_shufflevector(x, y, fold_lane<W>(I, true)...);
}

// v[0] = the kLanes sums of the 2W vectors v[0, 2W), after log2(2W) folds (W = kLanes/2, ..., 1): the sum of
// v[i] lands in lane bit_reverse(i).
template <int W>
inline void fold_all(attn::fvec* v) {
  if constexpr (W >= 1) {
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) v[i] = fold<W>(v[2 * i], v[2 * i + 1], std::make_integer_sequence<int, attn::kLanes>());
    fold_all<W / 2>(v);
  }
}

// i with its log2(kLanes) bits reversed.
constexpr int bit_reverse(int i) {
  int r = 0;
  for (int bit = 1, rbit = attn::kLanes / 2; bit < attn::kLanes; bit <<= 1, rbit >>= 1)
    if (i & bit) r |= rbit;
  return r;
}

// D % 16 == 0: st[jl] = q·k_jl, kLanes keys at a time (kLanes native accumulators: 16 zmm under AVX-512,
// 8 ymm under AVX2, so the 16 registers of AVX2 hold them with the query), folded into one vector of
// scores; the rest one by one.
template <class T>
void scores_vec(const float* q, const T* kb, int64_t ld, int64_t D, int64_t ja, int64_t je, float* st) {
  using attn::fvec, attn::kLanes, attn::load, attn::store;
  int64_t jl = ja;
  for (; jl + kLanes <= je; jl += kLanes) {
    fvec c[kLanes] = {};  // c[bit_reverse(i)] accumulates key jl + i
    for (int64_t e = 0; e < D; e += kLanes) {
      const fvec qv = load(q + e);
#pragma GCC unroll 16
      for (int i = 0; i < kLanes; ++i) c[bit_reverse(i)] += qv * load(kb + (jl + i) * ld + e);
    }
    fold_all<kLanes / 2>(c);
    store(st + jl, c[0]);
  }
  for (; jl < je; ++jl) {
    fvec c = {};
    for (int64_t e = 0; e < D; e += kLanes) c += load(q + e) * load(kb + jl * ld + e);
    float dot = 0.f;
#pragma GCC unroll 16
    for (int i = 0; i < kLanes; ++i) dot += c[i];
    st[jl] = dot;
  }
}

// Columns [d0, d0 + NV·kLanes) of acc = corr·acc + Σ_jl p[jl·ps]·v_jl, the accumulators in registers.
template <int NV, class T>
void pv_slice(float* acc, const float* p, int64_t ps, const T* vb, int64_t ld, int64_t d0, int64_t ja, int64_t je,
              float corr) {
  using attn::fvec, attn::kLanes, attn::load, attn::store;
  fvec c[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) c[v] = corr * load(acc + d0 + kLanes * v);
  for (int64_t jl = ja; jl < je; ++jl) {
    const float pj = p[jl * ps];
    const T* vj = vb + jl * ld + d0;
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) c[v] += pj * load(vj + kLanes * v);
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) store(acc + d0 + kLanes * v, c[v]);
}

// Native vectors per pv slice: 64 columns, at most 8 registers of accumulators.
constexpr int kPvVecs = std::min(64 / attn::kLanes, 8);

// D % 16 == 0: pv_any (probabilities p[jl·ps]) in slices of kPvVecs vectors.
template <class T>
void pv_vec(float* acc, const float* p, int64_t ps, const T* vb, int64_t ld, int64_t D, int64_t ja, int64_t je,
            float corr) {
  attn::for_slices<kPvVecs>(D, [&]<int NV>(int64_t d0) { pv_slice<NV>(acc, p, ps, vb, ld, d0, ja, je, corr); });
}

// Prefetches one KV head's rows [0, n) of a block (row jl at base + jl·ld, D elements), one 64-byte line
// at a time.
template <class T>
void prefetch_rows(const T* base, int64_t ld, int64_t n, int64_t D) {
  for (int64_t jl = 0; jl < n; ++jl)
    for (int64_t e = 0; e < D; e += 64 / sizeof(T)) __builtin_prefetch(base + jl * ld + e);
}

// Prefetches a block's first n scales (int8 pools): one contiguous row of floats.
inline void prefetch_scales(const float* scales, int64_t n) { prefetch_rows(scales, 0, 1, n); }

// One tile: rows [r0, r0 + nr) of sequence s, query heads [h0, h0 + nh) (all of KV head hk).
template <class T, bool kVec>
void attend_tile(const PagedAttentionArgs& a, const Dims& d, const Scratch& w, int64_t s, int64_t r0, int64_t nr,
                 int64_t h0, int64_t nh, int64_t hk) {
  const int64_t D = d.D, P = d.P, nq = nr * nh, ld_kv = D;  // one KV head of a block is [P, D], contiguous
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
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
  const float cap = d.softcap, inv_cap = cap > 0.f ? 1.f / cap : 0.f;
  const int64_t b_end = (hi_max + P - 1) / P;
  for (int64_t b = lo_min / P; b < b_end; ++b) {
    const int64_t j0 = b * P, n = std::min(P, hi_max - j0);
    const T* kb = k_pool + (table[b] * d.Hkv + hk) * P * D;  // key j0 + jl at kb + jl·D
    const T* vb = v_pool + (table[b] * d.Hkv + hk) * P * D;
    const float* ks = nullptr;  // int8: key jl's scale ks[jl], its value's vs[jl]
    const float* vs = nullptr;
    if constexpr (kScaled<T>) {
      ks = a.k_scales + (table[b] * d.Hkv + hk) * P;
      vs = a.v_scales + (table[b] * d.Hkv + hk) * P;
    }
    if (b + 1 < b_end) {  // the next block is elsewhere in the pool: no hardware prefetcher follows
      const int64_t n_next = std::min(P, hi_max - j0 - P);
      prefetch_rows(k_pool + (table[b + 1] * d.Hkv + hk) * P * D, ld_kv, n_next, D);
      prefetch_rows(v_pool + (table[b + 1] * d.Hkv + hk) * P * D, ld_kv, n_next, D);
      if constexpr (kScaled<T>) {
        prefetch_scales(a.k_scales + (table[b + 1] * d.Hkv + hk) * P, n_next);
        prefetch_scales(a.v_scales + (table[b + 1] * d.Hkv + hk) * P, n_next);
      }
    }
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t ja = std::max<int64_t>(w.lo[t] - j0, 0), je = std::min<int64_t>(w.hi[t] - j0, n);
      if (ja >= je) continue;  // this block is outside the vector's window or past its position
      float* st = w.s + t * P;
      if constexpr (kVec)
        scores_vec(w.q + t * D, kb, ld_kv, D, ja, je, st);
      else
        scores_any(w.q + t * D, kb, ld_kv, D, ja, je, st);
      if constexpr (kScaled<T>) {
#pragma omp simd
        for (int64_t jl = ja; jl < je; ++jl) st[jl] *= ks[jl];
      }
      if (cap > 0.f) {
#pragma omp simd
        for (int64_t jl = ja; jl < je; ++jl) st[jl] = cap * vec::tanh(st[jl] * inv_cap);
      }
      float mb = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mb)
      for (int64_t jl = ja; jl < je; ++jl) mb = mb > st[jl] ? mb : st[jl];
      const float m_new = std::max(w.m[t], mb);
      const float corr = vec::exp(w.m[t] - m_new);  // 0 on the vector's first block (m = −inf)
      w.m[t] = m_new;
      float sum = 0.f;
#pragma omp simd reduction(+ : sum)
      for (int64_t jl = ja; jl < je; ++jl) {
        const float p = vec::exp(st[jl] - m_new);
        sum += p;
        if constexpr (kScaled<T>)
          st[jl] = p * vs[jl];  // P·V on the codes: the value's scale rides on its probability
        else
          st[jl] = p;
      }
      w.l[t] = w.l[t] * corr + sum;
      if constexpr (kVec)
        pv_vec(w.acc + t * D, st, 1, vb, ld_kv, D, ja, je, corr);
      else
        pv_any(w.acc + t * D, st, vb, ld_kv, D, ja, je, corr);
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


// A full tile (D % 16 == 0, at least kWideMin vectors): the 16 query vectors are the 16 lanes. Queries
// are transposed once per tile, so a block's scores are one vector per key (D FMAs against broadcast key
// elements, no folds), and max, exp and the running sums run on all vectors at once.
constexpr int kWideMin = 8;
// Keys per step of the wide tile's scores: their accumulators and the query vectors fill the registers.
constexpr int kWideKeys = attn::kRegs >= 32 ? 8 : 12 / attn::kPer16;

// dst[0, n) = src[0, n) widened, n a multiple of kLanes: a bf16 or int8 block for the wide tile, whose
// scores read single key elements (broadcast) and whose nq ≥ kWideMin P·V passes would each widen it again.
// int8 codes are widened unscaled (exact); the scales apply to the scores and probabilities.
template <class T>
void widen_block(const T* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; i += attn::kLanes) attn::store(dst + i, attn::load(src + i));
}

template <class T>
void attend_tile_wide(const PagedAttentionArgs& a, const Dims& d, const Scratch& w, int64_t s, int64_t r0, int64_t nr,
                      int64_t h0, int64_t nh, int64_t hk) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t D = d.D, P = d.P, nq = nr * nh;
  const T* k_pool = static_cast<const T*>(a.k_pool);
  const T* v_pool = static_cast<const T*>(a.v_pool);
  const std::span<const int32_t> table = a.block_tables[s];
  const int64_t ctx = a.context_lens[s];
  float* qt = w.q;  // [D, 16]: lane t is query vector t (zero past nq)
  float* st = w.s;  // [P, 16]: scores, then probabilities, of key jl in row jl
  int64_t lo_min = ctx, hi_max = 0;
  for (int64_t t = 0; t < kTileQ; ++t) {
    const bool live = t < nq;
    const int64_t r = t / nh, hh = t % nh;
    const int64_t pos = live ? a.positions[r0 + r] : 0;
    w.hi[t] = live ? std::min(pos + 1, ctx) : 0;  // padding lanes see no key
    w.lo[t] = live && d.window > 0 ? std::max<int64_t>(0, pos - d.window + 1) : 0;
    if (live) {
      lo_min = std::min(lo_min, w.lo[t]);
      hi_max = std::max(hi_max, w.hi[t]);
    }
    const float* src = a.q + ((r0 + r) * d.H + h0 + hh) * D;
    for (int64_t e = 0; e < D; ++e) qt[e * kTileQ + t] = live ? src[e] * d.scale : 0.f;
    w.m[t] = kNegInf;
    w.l[t] = 0.f;
    std::fill(w.acc + t * D, w.acc + (t + 1) * D, 0.f);
  }
  const float cap = d.softcap, inv_cap = cap > 0.f ? 1.f / cap : 0.f;
  const int64_t b_end = (hi_max + P - 1) / P;
  float corr[kTileQ];
  for (int64_t b = lo_min / P; b < b_end; ++b) {
    const int64_t j0 = b * P, n = std::min(P, hi_max - j0);
    const T* kb_pool = k_pool + (table[b] * d.Hkv + hk) * P * D;  // key j0 + jl at kb_pool + jl·D
    const T* vb_pool = v_pool + (table[b] * d.Hkv + hk) * P * D;
    const float* ks = nullptr;  // int8: key jl's scale ks[jl], its value's vs[jl]
    const float* vs = nullptr;
    if constexpr (kScaled<T>) {
      ks = a.k_scales + (table[b] * d.Hkv + hk) * P;
      vs = a.v_scales + (table[b] * d.Hkv + hk) * P;
    }
    if (b + 1 < b_end) {
      const int64_t n_next = std::min(P, hi_max - j0 - P);
      prefetch_rows(k_pool + (table[b + 1] * d.Hkv + hk) * P * D, D, n_next, D);
      prefetch_rows(v_pool + (table[b + 1] * d.Hkv + hk) * P * D, D, n_next, D);
      if constexpr (kScaled<T>) {
        prefetch_scales(a.k_scales + (table[b + 1] * d.Hkv + hk) * P, n_next);
        prefetch_scales(a.v_scales + (table[b + 1] * d.Hkv + hk) * P, n_next);
      }
    }
    const float* kb;  // the block's keys and values as f32
    const float* vb;
    if constexpr (std::is_same_v<T, float>) {
      kb = kb_pool;
      vb = vb_pool;
    } else {
      widen_block(kb_pool, n * D, w.kw);
      widen_block(vb_pool, n * D, w.vw);
      kb = w.kw;
      vb = w.vw;
    }
    // Scores of kWideKeys keys at a time: kWideKeys x kPer16 accumulators (8 zmm; AVX2 12 ymm).
    using attn::fvec, attn::kLanes, attn::kPer16, attn::load, attn::store;
    int64_t jl = 0;
    for (; jl + kWideKeys <= n; jl += kWideKeys) {
      fvec c[kWideKeys][kPer16] = {};
      for (int64_t e = 0; e < D; ++e) {
        fvec qe[kPer16];
#pragma GCC unroll 4
        for (int h = 0; h < kPer16; ++h) qe[h] = load(qt + e * kTileQ + h * kLanes);
#pragma GCC unroll 8
        for (int i = 0; i < kWideKeys; ++i) {
          const float kie = kb[(jl + i) * D + e];
#pragma GCC unroll 4
          for (int h = 0; h < kPer16; ++h) c[i][h] += kie * qe[h];
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < kWideKeys; ++i)
#pragma GCC unroll 4
        for (int h = 0; h < kPer16; ++h) store(st + (jl + i) * kTileQ + h * kLanes, c[i][h]);
    }
    for (; jl < n; ++jl) {
      fvec c[kPer16] = {};
      for (int64_t e = 0; e < D; ++e) {
        const float kje = kb[jl * D + e];
#pragma GCC unroll 4
        for (int h = 0; h < kPer16; ++h) c[h] += kje * load(qt + e * kTileQ + h * kLanes);
      }
#pragma GCC unroll 4
      for (int h = 0; h < kPer16; ++h) store(st + jl * kTileQ + h * kLanes, c[h]);
    }
    if constexpr (kScaled<T>) {
      for (jl = 0; jl < n; ++jl) {
        float* row = st + jl * kTileQ;
        const float kscale = ks[jl];
#pragma omp simd
        for (int t = 0; t < kTileQ; ++t) row[t] *= kscale;
      }
    }
    // Softcap, then keys outside a lane's [lo, hi) to −inf; the block's max per lane.
    float mb[kTileQ];
    std::fill(mb, mb + kTileQ, kNegInf);
    if (cap > 0.f) {
#pragma omp simd
      for (jl = 0; jl < n * kTileQ; ++jl) st[jl] = cap * vec::tanh(st[jl] * inv_cap);
    }
    for (jl = 0; jl < n; ++jl) {
      float* row = st + jl * kTileQ;
      const int64_t j = j0 + jl;
#pragma omp simd
      for (int t = 0; t < kTileQ; ++t) {
        row[t] = vec::select((j >= w.lo[t]) & (j < w.hi[t]), row[t], kNegInf);  // & not &&: no branch
        mb[t] = mb[t] > row[t] ? mb[t] : row[t];
      }
    }
    float m_use[kTileQ];  // the new running max, 0 where a lane has seen no key yet (keeps exp off −inf − −inf)
#pragma omp simd
    for (int t = 0; t < kTileQ; ++t) {
      const float m_new = w.m[t] > mb[t] ? w.m[t] : mb[t];
      m_use[t] = vec::select(m_new == kNegInf, 0.f, m_new);
      corr[t] = vec::exp(w.m[t] - m_use[t]);
      w.m[t] = m_new;
      w.l[t] *= corr[t];
    }
    for (jl = 0; jl < n; ++jl) {
      float* row = st + jl * kTileQ;
      const float vscale = kScaled<T> ? vs[jl] : 1.f;
#pragma omp simd
      for (int t = 0; t < kTileQ; ++t) {
        const float p = vec::exp(row[t] - m_use[t]);
        w.l[t] += p;
        row[t] = kScaled<T> ? p * vscale : p;  // int8: P·V on the codes, the value's scale on p
      }
    }
    for (int64_t t = 0; t < nq; ++t) pv_vec(w.acc + t * D, st + t, kTileQ, vb, D, D, 0, n, corr[t]);
  }
  for (int64_t t = 0; t < nq; ++t) {
    const float inv = 1.f / w.l[t];
    const float* acc = w.acc + t * D;
    float* dst = a.out + ((r0 + t / nh) * d.H + h0 + t % nh) * D;
#pragma omp simd
    for (int64_t e = 0; e < D; ++e) dst[e] = acc[e] * inv;
  }
}

// One row's D values into a slot of the pool (int8: its codes, and its scale into *scale).
void write_row(float* dst, float*, const float* src, int64_t D) { std::memcpy(dst, src, D * sizeof(float)); }
void write_row(bf16* dst, float*, const float* src, int64_t D) {
  for (int64_t e = 0; e < D; ++e) dst[e] = f32_to_bf16(src[e]);
}
// Symmetric absmax quantisation, as ref::quantize_kv_int8: s = absmax / 127, c = round(x · (1 / s)).
void write_row(int8_t* dst, float* scale, const float* src, int64_t D) {
  float amax = 0.f;
#pragma omp simd reduction(max : amax)
  for (int64_t e = 0; e < D; ++e) amax = std::max(amax, std::fabs(src[e]));
  const float s = amax / 127.f, inv = s != 0.f ? 1.f / s : 0.f;
  for (int64_t e = 0; e < D; ++e) dst[e] = static_cast<int8_t>(std::clamp(std::round(src[e] * inv), -127.f, 127.f));
  *scale = s;
}

template <class T>
void kv_write(const PagedAttentionArgs& a, const float* k, const float* v, const PagedKvDest& dest) {
  const int64_t Hkv = a.n_kv_heads, D = a.head_dim, P = a.block_size;
  T* k_pool = static_cast<T*>(dest.k_pool);
  T* v_pool = static_cast<T*>(dest.v_pool);
  for (int64_t s = 0; s < a.n_seqs; ++s)
    for (int64_t i = a.seq_starts[s]; i < a.seq_starts[s + 1]; ++i) {
      const int64_t pos = a.positions[i], block = a.block_tables[s][pos / P];
      for (int64_t hk = 0; hk < Hkv; ++hk) {
        const int64_t slot = (block * Hkv + hk) * P + pos % P;  // the slot's scale index; its D values at slot·D
        write_row(k_pool + slot * D, kScaled<T> ? dest.k_scales + slot : nullptr, k + (i * Hkv + hk) * D, D);
        write_row(v_pool + slot * D, kScaled<T> ? dest.v_scales + slot : nullptr, v + (i * Hkv + hk) * D, D);
      }
    }
}

// paged_attention over a pool of T: the tasks, each worker's scratch, the tile kernel per task.
template <class T>
void attend_all(const PagedAttentionArgs& a, const Dims& d, const ThreadPool& pool) {
  const int64_t group = d.group;
  // Tasks of sequence s: [task_starts[s], task_starts[s + 1]), ordered (row tile, KV head, head part).
  const int64_t per_row_tile = d.Hkv * d.tile.head_parts;
  a.task_starts[0] = 0;
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    const int64_t rows = a.seq_starts[s + 1] - a.seq_starts[s];
    a.task_starts[s + 1] = a.task_starts[s] + (rows + d.tile.rows - 1) / d.tile.rows * per_row_tile;
  }
  const int64_t n_tasks = a.task_starts[a.n_seqs];
  if (n_tasks == 0) return;
  const int64_t per_worker =
      paged_attention_scratch_floats(a.n_heads, a.n_kv_heads, a.head_dim, a.block_size, a.kv_dtype);
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
      if (d.D % 16 == 0 && nr * nh >= kWideMin)
        attend_tile_wide<T>(a, d, w, s, r0, nr, h0, nh, hk);
      else if (d.D % 16 == 0)
        attend_tile<T, true>(a, d, w, s, r0, nr, h0, nh, hk);
      else
        attend_tile<T, false>(a, d, w, s, r0, nr, h0, nh, hk);
    }
  });
}

}  // namespace

int64_t paged_attention_scratch_floats(int n_heads, int n_kv_heads, int head_dim, int block_size, DType kv_dtype) {
  // q, acc, s, m, l and lo, hi (int64: two floats each), plus 16 for aligning the start; a bf16 or int8
  // pool's widened block (keys and values) after them.
  const int64_t widened = kv_dtype != DType::kF32 ? 2 * block_size * round16(head_dim) : 0;
  return kTileQ * (2 * round16(head_dim) + round16(block_size)) + 2 * kTileQ + 4 * kTileQ + 16 + widened;
}

void paged_kv_write(const PagedAttentionArgs& a, const float* k, const float* v, const PagedKvDest& dest) {
  if (a.kv_dtype == DType::kBF16)
    kv_write<bf16>(a, k, v, dest);
  else if (a.kv_dtype == DType::kI8)
    kv_write<int8_t>(a, k, v, dest);
  else
    kv_write<float>(a, k, v, dest);
}

void paged_attention(const PagedAttentionArgs& a, const AttentionOptions& opt, const ThreadPool& pool) {
  const int64_t group = a.n_heads / a.n_kv_heads;
  const Dims d{.H = a.n_heads, .Hkv = a.n_kv_heads, .D = a.head_dim, .P = a.block_size, .group = group,
               .scale = opt.scale != 0.f ? opt.scale : static_cast<float>(1.0 / std::sqrt(double(a.head_dim))),
               .softcap = opt.softcap, .window = opt.window, .tile = tile_shape(static_cast<int>(group))};
  if (a.kv_dtype == DType::kBF16)
    attend_all<bf16>(a, d, pool);
  else if (a.kv_dtype == DType::kI8)
    attend_all<int8_t>(a, d, pool);
  else
    attend_all<float>(a, d, pool);
}

}  // namespace lathe
