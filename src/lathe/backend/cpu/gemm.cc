// CPU gemm dispatcher: picks the instruction tier, then runs either the skinny-M (GEMV) path or the
// Goto/BLIS blocked algorithm (pack A and B into cache-sized panels, call the tier's register-tiled
// micro-kernel), split over the ThreadPool's workers.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>

#include "lathe/backend/cpu/column_chunks.h"
#include "lathe/backend/cpu/gemm_internal.h"
#include "lathe/base/context.h"

namespace lathe::cpu {

// ---------------------------------------------------------------------------------------------------
// Tier selection.

GemmIsa gemm_max_supported_isa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return __builtin_cpu_supports("avx512bf16") ? GemmIsa::kAvx512Bf16 : GemmIsa::kAvx512;
  }
  // F16C (f16 weights) came with Ivy Bridge and Piledriver, before AVX2: every AVX2 CPU has it.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return GemmIsa::kAvx2;
#endif
  return GemmIsa::kScalar;
}

GemmIsa gemm_selected_isa() {
  // Read once: the tier must not change under a running program.
  static const GemmIsa isa = [] {
    GemmIsa best = gemm_max_supported_isa();
    const char* env = std::getenv("LATHE_CPU");
    const std::string_view want = env ? env : "";
    GemmIsa cap = GemmIsa::kAvx512Bf16;
    if (want == "scalar") cap = GemmIsa::kScalar;
    if (want == "avx2") cap = GemmIsa::kAvx2;
    if (want == "avx512") cap = GemmIsa::kAvx512;
    // Intel's Sapphire/Emerald Rapids run vdpbf16ps at half the f32 FMA rate (measured with
    // bench/peak_fma.cc: 78 vs 158 GFLOP/s per core), so there widening bf16 to f32 while packing and
    // using the FMA kernel is faster; AMD Zen 4/5 run it at twice the FMA rate.
#if defined(__x86_64__) || defined(__i386__)
    if (best == GemmIsa::kAvx512Bf16 && __builtin_cpu_is("intel")) best = GemmIsa::kAvx512;
#endif
    return std::min(best, cap);
  }();
  return isa;
}

const GemmKernels& gemm_kernels_for(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512Bf16: return gemm_kernels_avx512_bf16();
    case GemmIsa::kAvx512: return gemm_kernels_avx512();
    case GemmIsa::kAvx2: return gemm_kernels_avx2();
    default: return gemm_kernels_scalar();
  }
}

const char* gemm_isa() {
  static constexpr const char* kNames[] = {"scalar", "avx2", "avx512", "avx512bf16"};
  return kNames[static_cast<int>(gemm_selected_isa())];
}

bool gemm_has_fast_bf16_dot() { return gemm_selected_isa() == GemmIsa::kAvx512Bf16; }

namespace {

// ---------------------------------------------------------------------------------------------------
// Element access and packing.

inline float to_f32(float v) { return v; }
inline float to_f32(bf16 v) { return bf16_to_f32(v); }
inline float to_f32(f16 v) { return f16_to_f32(v); }
inline uint16_t to_bits(bf16 v) { return v.bits; }


// Operand view: element (r, c) of op(X) where op(X) is [rows, cols].
template <class T>
struct OpView {
  const T* x;
  int64_t ld;
  bool trans;  // stored [cols, rows]
  T at(int64_t r, int64_t c) const { return trans ? x[c * ld + r] : x[r * ld + c]; }
};

// Packs [kc][W] micro-panels from an operand whose k rows are contiguous (A with trans_a, B without
// trans_b): columns [c0, c0 + width) of rows p0..p0+kc of the stored matrix, zero from c_end on. The k
// loop is outermost so each stored row is read as one contiguous run, and the run kPackAhead rows below
// is prefetched: a new row is a new stream that the hardware prefetcher would meet with a miss per row.
constexpr int kPackAhead = 8;

// Panels go kGroup at a time (~1 KiB of each stored row): packing a wide A (3072 rows of a GPT-2 dW) in
// one sweep wrote to hundreds of panels, each in its own page, per stored row.
template <int W, class T>
void pack_rows_w(const OpView<T>& v, int64_t p0, int64_t kc, int64_t c0, int64_t width, int64_t c_end, float* dst) {
  constexpr int64_t kGroup = W >= 256 ? 1 : 256 / W;
  const int64_t panels = width / W;
  for (int64_t g0 = 0; g0 < panels; g0 += kGroup) {
    const int64_t g1 = std::min(panels, g0 + kGroup), cg = c0 + g0 * W;  // panels [g0, g1), from column cg
    const int64_t full = std::clamp<int64_t>((c_end - cg) / W, 0, g1 - g0);  // panels with W valid columns
    const int64_t bytes = std::clamp<int64_t>(c_end - cg, 0, (g1 - g0) * W) * static_cast<int64_t>(sizeof(T));
    for (int64_t p = 0; p < kc; ++p) {
      const T* s = v.x + (p0 + p) * v.ld + cg;
      if (p + kPackAhead < kc) {
        const char* ahead = reinterpret_cast<const char*>(s + kPackAhead * v.ld);
        for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(ahead + off, 0, 2);  // to L2
      }
      float* d = dst + g0 * kc * W + p * W;
      int64_t panel = 0;
      for (; panel < full; ++panel, s += W, d += kc * W)
        for (int j = 0; j < W; ++j) d[j] = to_f32(s[j]);  // compile-time W: whole vector moves
      for (; panel < g1 - g0; ++panel, s += W, d += kc * W) {
        const int64_t valid = std::clamp<int64_t>(c_end - (cg + panel * W), 0, W);
        for (int j = 0; j < W; ++j) d[j] = j < valid ? to_f32(s[j]) : 0.f;
      }
    }
  }
}

// width is a multiple of w; the tiers' MR and NR get a compile-time width.
template <class T>
void pack_rows(const OpView<T>& v, int64_t p0, int64_t kc, int64_t c0, int64_t width, int64_t c_end, int w,
               float* dst) {
  switch (w) {
    case 32: return pack_rows_w<32>(v, p0, kc, c0, width, c_end, dst);
    case 16: return pack_rows_w<16>(v, p0, kc, c0, width, c_end, dst);
    case 14: return pack_rows_w<14>(v, p0, kc, c0, width, c_end, dst);
    case 6: return pack_rows_w<6>(v, p0, kc, c0, width, c_end, dst);
    case 4: return pack_rows_w<4>(v, p0, kc, c0, width, c_end, dst);
    default: break;
  }
  for (int64_t p = 0; p < kc; ++p) {
    const T* s = v.x + (p0 + p) * v.ld;
    for (int64_t panel = 0; panel * w < width; ++panel) {
      float* d = dst + panel * kc * w + p * w;
      const int64_t c = c0 + panel * w;
      const int64_t valid = std::clamp<int64_t>(c_end - c, 0, w);
      for (int j = 0; j < w; ++j) d[j] = j < valid ? to_f32(s[c + j]) : 0.f;
    }
  }
}

// Packs `rows` stored rows of a bf16 matrix (row r at x + (r0 + r) * ld, k = p0 .. p0 + kc contiguous) as
// bf16 pairs [kcp][stride] with the tier's f32 transposing packer: a row's pair (k even, k odd) is one
// aligned u32 that the packer moves as it is. Returns false, packing nothing, when the pairs are not whole
// words at 4-byte boundaries (kc, ld or p0 odd, x not 4-byte aligned) or the tier has no such packer.
template <class T>
bool pack_pairs_as_words(const T* x, int64_t ld, int64_t r0, int rows, int64_t p0, int64_t kc, int stride,
                         PackTransposeFn<float> pack_pairs, uint32_t* dst) {
  if constexpr (!std::is_same_v<T, bf16>) {
    return false;
  } else {
    if (!pack_pairs || kc % 2 || ld % 2 || p0 % 2 || reinterpret_cast<uintptr_t>(x) % 4) return false;
    pack_pairs(reinterpret_cast<const float*>(x + r0 * ld + p0), ld / 2, rows, kc / 2, stride,
               reinterpret_cast<float*>(dst));
    return true;
  }
}

// Packed element: f32, or a u32 holding the bf16 pair (k even, k odd) for vdpbf16ps.
// pack_a: rows [i0, i0+mc) x k [p0, p0+kc) of op(A) into ceil(mc/MR) micro-panels of [kcp][MR].
template <class TA, class PackT>
void pack_a(const OpView<TA>& a, int64_t i0, int64_t mc, int64_t p0, int64_t kc, int mr, PackTransposeFn<TA> pack_t,
            PackTransposeFn<float> pack_pairs, PackT* dst) {
  constexpr bool kPairs = std::is_same_v<PackT, uint32_t>;
  const int64_t kcp = kPairs ? (kc + 1) / 2 : kc;
  if constexpr (!kPairs) {
    if (a.trans) {  // k rows of A are contiguous: pack all panels at once
      return pack_rows(a, p0, kc, i0, (mc + mr - 1) / mr * mr, i0 + mc, mr, dst);
    }
  }
  for (int64_t panel = 0; panel * mr < mc; ++panel) {
    PackT* d = dst + panel * kcp * mr;
    const int64_t r0 = i0 + panel * mr, rows = std::min<int64_t>(mr, i0 + mc - r0);
    if constexpr (kPairs) {
      if (!a.trans && pack_pairs_as_words(a.x, a.ld, r0, static_cast<int>(rows), p0, kc, mr, pack_pairs, d)) continue;
      for (int i = 0; i < mr; ++i)
        for (int64_t q = 0; q < kcp; ++q) {
          uint32_t lo = 0, hi = 0;
          if (i < rows) {
            lo = to_bits(a.at(r0 + i, p0 + 2 * q));
            if (2 * q + 1 < kc) hi = to_bits(a.at(r0 + i, p0 + 2 * q + 1));
          }
          d[q * mr + i] = lo | (hi << 16);
        }
    } else if (pack_t) {
      pack_t(a.x + r0 * a.ld + p0, a.ld, static_cast<int>(rows), kc, mr, d);
    } else {  // read each row contiguously, scatter with stride MR
      for (int i = 0; i < mr; ++i) {
        if (i >= rows) {
          for (int64_t p = 0; p < kc; ++p) d[p * mr + i] = 0.f;
          continue;
        }
        const TA* s = a.x + (r0 + i) * a.ld + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * mr + i] = to_f32(s[p]);
      }
    }
  }
}

// pack_b: k [p0, p0+kc) x cols [j0, j0+nc) of op(B) into ceil(nc/NR) micro-panels of [kcp][NR]
// (bf16 pairs: [kcp][NR][2]); columns past nc are zero so the kernel needs no column edge in its loop.
template <class TB, class PackT>
void pack_b(const OpView<TB>& b, int64_t p0, int64_t kc, int64_t j0, int64_t nc, int nr, PackTransposeFn<TB> pack_t,
            PackTransposeFn<float> pack_pairs, PackT* dst) {
  constexpr bool kPairs = std::is_same_v<PackT, uint32_t>;
  const int64_t kcp = kPairs ? (kc + 1) / 2 : kc;
  if constexpr (!kPairs) {
    if (!b.trans) return pack_rows(b, p0, kc, j0, (nc + nr - 1) / nr * nr, j0 + nc, nr, dst);
  }
  for (int64_t panel = 0; panel * nr < nc; ++panel) {
    PackT* d = dst + panel * kcp * nr;
    const int64_t c0 = j0 + panel * nr, cols = std::min<int64_t>(nr, j0 + nc - c0);
    if constexpr (kPairs) {
      // W [N, K] (a Linear's weight): each column's k run is a stored row.
      if (b.trans && pack_pairs_as_words(b.x, b.ld, c0, static_cast<int>(cols), p0, kc, nr, pack_pairs, d)) continue;
      uint16_t* h = reinterpret_cast<uint16_t*>(d);
      for (int64_t q = 0; q < kcp; ++q)
        for (int j = 0; j < nr; ++j) {
          const bool in = j < cols;
          h[(q * nr + j) * 2] = in ? to_bits(b.at(p0 + 2 * q, c0 + j)) : 0;
          h[(q * nr + j) * 2 + 1] = in && 2 * q + 1 < kc ? to_bits(b.at(p0 + 2 * q + 1, c0 + j)) : 0;
        }
    } else if (pack_t) {
      pack_t(b.x + c0 * b.ld + p0, b.ld, static_cast<int>(cols), kc, nr, d);
    } else {  // B [N, K] (Linear weight): read rows of W contiguously, scatter with stride NR
      for (int j = 0; j < nr; ++j) {
        if (j >= cols) {
          for (int64_t p = 0; p < kc; ++p) d[p * nr + j] = 0.f;
          continue;
        }
        const TB* s = b.x + (c0 + j) * b.ld + p0;
        for (int64_t p = 0; p < kc; ++p) d[p * nr + j] = to_f32(s[p]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Blocked algorithm.

}  // namespace

// Cache blocking (Goto/BLIS loop order), from the cache sizes of this CPU (cache_info.h). An A micro-panel
// (MR x KC) stays in L1 across the jr loop while B micro-panels stream from the worker's L2, which holds the
// packed B chunk (KC x NC); the packed A block (MC x KC: all of a worker's rows up to a_block elements) is
// used right after packing, while it is still in L2/L3, and every element of A and B is packed once per
// worker. The old constants (KC 384, NC 512: a 768 KiB B chunk) were tuned for a 1.25 MiB L2 and spilled
// to L3 on a CPU with 512 KiB.
GemmBlocking gemm_blocking_for(const CacheInfo& caches, int mr, int nr) {
  constexpr int64_t kF32 = sizeof(float);
  GemmBlocking blk;
  // The A micro-panel in at most half of L1d (the B lines streaming through take the rest); past 384 steps
  // the C tile's load and store are under 1% of the kernel's time, so a longer panel gains nothing.
  blk.kc = std::clamp<int64_t>(caches.l1d / 2 / (mr * kF32) / 8 * 8, 128, 384);
  // The B chunk in half of L2 (A micro-panels and C tiles pass through the other half); at least 4 panels.
  blk.nc = std::max<int64_t>(4 * nr, caches.l2 / 2 / (blk.kc * kF32) / nr * nr);
  // The A block in a quarter of L3 (shared with the other workers' blocks and C), at most 8 MiB: a VM sees
  // its socket's whole L3 (260 MiB on an Intel Xeon of 2026-12-08) but shares it with other tenants, and a
  // 16 MiB block there measured no faster than 8 MiB (gemm_bench, interleaved) while doubling the packing
  // buffers, which the training memory plan does not count (train/memory_plan.h).
  blk.a_block = std::clamp<int64_t>(caches.l3 / 4 / kF32, int64_t{1} << 16, int64_t{2} << 20);
  return blk;
}

namespace {

// The transposing packer of the tier for element type T (nullptr: portable loop).
template <class T>
PackTransposeFn<T> pack_t_for(const GemmKernels& kern) {
  if constexpr (std::is_same_v<T, float>) return kern.pack_t_f32;
  else if constexpr (std::is_same_v<T, bf16>) return kern.pack_t_bf16;
  else return kern.pack_t_f16;
}

// Splits extent into equal blocks of at most max_block, rounded up to a multiple of unit (M = 1024 with a
// 1008-row limit would otherwise leave a 16-row block).
int64_t balanced_block(int64_t extent, int64_t max_block, int64_t unit) {
  const int64_t n_blocks = (extent + max_block - 1) / max_block;
  const int64_t block = (extent + n_blocks - 1) / n_blocks;
  return (block + unit - 1) / unit * unit;
}

template <class TA, class TB, class PackT, class Kernel>
void gemm_blocked(const GemmKernels& kern, int mr, int nr, Kernel kernel, const GemmArgs<TA, TB>& g,
                  const ThreadPool& pool) {
  constexpr bool kPairs = std::is_same_v<PackT, uint32_t>;
  const auto packed_k = [](int64_t kc) { return kPairs ? (kc + 1) / 2 : kc; };  // packed steps of kc
  const OpView<TA> a{g.a, g.lda, g.trans_a};
  const OpView<TB> b{g.b, g.ldb, g.trans_b};
  const int64_t m = g.m, n = g.n, k = g.k;
  const PackTransposeFn<TA> pack_ta = kPairs ? nullptr : pack_t_for<TA>(kern);
  const PackTransposeFn<TB> pack_tb = kPairs ? nullptr : pack_t_for<TB>(kern);
  const PackTransposeFn<float> pack_pairs = kPairs ? kern.pack_t_f32 : nullptr;  // bf16 pairs moved as u32 words
  const int64_t row_panels = (m + mr - 1) / mr, n_panels = (n + nr - 1) / nr;
  const GemmBlocking blk = gemm_blocking_for(cache_info(), mr, nr);

  // Workers split the rows or the columns into equal whole-panel ranges and run independently, each
  // packing the A rows and B columns it needs: no shared buffer, no barrier. (One packed A shared by the
  // workers, with a barrier per stage and a chunk counter, measured no faster per core in CPU time.)
  // A column split packs all of A (M x K) in every worker, a row split all of B (K x N): the split takes
  // the smaller duplicate, e.g. columns for the GPT-2 forward and dX (M = 256 tokens), rows for dW.
  const int64_t work = m * n * k;
  int n_workers = work < (int64_t{1} << 18) ? 1 : pool.n_threads();
  const bool split_m = m > n;
  n_workers = static_cast<int>(std::min<int64_t>(n_workers, split_m ? row_panels : n_panels));

  // Blocks: A [mc_blk rows][kc_blk], B [kc_blk][chunk_cols].
  const int64_t kc_blk = balanced_block(k, blk.kc, 2);  // even: bf16 pairs never straddle two blocks
  const int64_t kcp_max = packed_k(kc_blk);
  const int64_t rows_max = split_m ? (row_panels + n_workers - 1) / n_workers * mr : m;  // per worker
  const int64_t mc_blk = balanced_block(rows_max, std::max<int64_t>(mr, blk.a_block / kcp_max / mr * mr), mr);
  // Each worker splits its columns into equal chunks of at most blk.nc (its own balanced_block, which is not
  // monotonic in the width: the buffer takes the bound).
  const int64_t cols_max = split_m ? n : (n_panels + n_workers - 1) / n_workers * nr;  // per worker
  const int64_t chunk_cols_max = (std::min(cols_max, blk.nc) + nr - 1) / nr * nr;

  // All packing buffers in one block from the Context allocator, which keeps freed blocks of >= 1 MiB (a
  // fresh mapping per call cost ~2% of the call in page faults) and aligns every block to 64 bytes. A
  // GEMM inside a pool task (attention's, a GEMM pair's) draws on the submitting thread's context too:
  // the pool installs it on its helpers. Each buffer starts on a 64-byte boundary (the kernels load packed
  // panels with aligned loads).
  const auto align16 = [](int64_t elems) { return (elems + 15) / 16 * 16; };
  const int64_t per_worker_elems = align16(mc_blk * kcp_max) + align16(chunk_cols_max * kcp_max);
  const size_t scratch_bytes = static_cast<size_t>(n_workers * per_worker_elems) * sizeof(PackT);
  const std::shared_ptr<void> scratch = current_context().alloc.allocate(scratch_bytes);

  pool.run_on_workers(n_workers, [&](int w, int nw) {
    int64_t m0 = 0, m1 = m, n0 = 0, n1 = n;  // this worker's rows and columns, whole panels
    if (split_m) {
      m0 = row_panels * w / nw * mr;
      m1 = std::min(m, row_panels * (w + 1) / nw * mr);
    } else {
      n0 = n_panels * w / nw * nr;
      n1 = std::min(n, n_panels * (w + 1) / nw * nr);
    }
    const int64_t chunk_cols = balanced_block(n1 - n0, blk.nc, nr);
    PackT* const a_pack = static_cast<PackT*>(scratch.get()) + w * per_worker_elems;
    PackT* const b_pack = a_pack + align16(mc_blk * kcp_max);
    for (int64_t i0 = m0; i0 < m1; i0 += mc_blk) {
      const int64_t mc = std::min(mc_blk, m1 - i0);
      const int64_t a_panels = (mc + mr - 1) / mr;
      for (int64_t p0 = 0; p0 < k; p0 += kc_blk) {
        const int64_t kc = std::min(kc_blk, k - p0), kcp = packed_k(kc);
        const float beta = p0 == 0 ? g.beta : 1.f;  // later K blocks accumulate onto the first
        pack_a<TA, PackT>(a, i0, mc, p0, kc, mr, pack_ta, pack_pairs, a_pack);
        for (int64_t j0 = n0; j0 < n1; j0 += chunk_cols) {
          const int64_t nc = std::min(chunk_cols, n1 - j0);
          pack_b<TB, PackT>(b, p0, kc, j0, nc, nr, pack_tb, pack_pairs, b_pack);
          for (int64_t ip = 0; ip < a_panels; ++ip) {
            const int rows = static_cast<int>(std::min<int64_t>(mr, mc - ip * mr));
            float* crow = g.c + (i0 + ip * mr) * g.ldc;
            for (int64_t jp = 0; jp * nr < nc; ++jp) {
              const int cols = static_cast<int>(std::min<int64_t>(nr, nc - jp * nr));
              kernel(kcp, a_pack + ip * kcp * mr, b_pack + jp * kcp * nr, crow + j0 + jp * nr, g.ldc, rows, cols,
                     g.alpha, beta);
            }
          }
        }
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------------
// Skinny M (decode): x rows made contiguous f32 (or, bf16 x bf16 with the dot kernel, taken as they are),
// columns split over the workers.

template <class TA, class TB>
void gemm_skinny(const GemmKernels& kern, const GemmArgs<TA, TB>& g, const ThreadPool& pool) {
  const int m = static_cast<int>(g.m);
  if constexpr (std::is_same_v<TA, bf16> && std::is_same_v<TB, bf16>) {
    if (g.trans_b && kern.gemv_nt_dot_bf16) {
      return for_column_chunks(g.n, g.k, pool, [&](int64_t j0, int64_t j1) {
        kern.gemv_nt_dot_bf16(m, g.k, g.a, g.lda, g.b, g.ldb, j0, j1, g.c, g.ldc, g.alpha, g.beta);
      });
    }
  }
  const float* x = nullptr;
  std::unique_ptr<float[]> x_copy;
  if constexpr (std::is_same_v<TA, float>) {
    if (!g.trans_a && (m == 1 || g.lda == g.k)) x = g.a;
  }
  if (!x) {
    x_copy.reset(new float[m * g.k]);
    const OpView<TA> a{g.a, g.lda, g.trans_a};
    for (int i = 0; i < m; ++i)
      for (int64_t p = 0; p < g.k; ++p) x_copy[i * g.k + p] = to_f32(a.at(i, p));
    x = x_copy.get();
  }
  const GemvFn<TB> fn = gemv_for<TB>(kern);
  for_column_chunks(g.n, g.k, pool,
                    [&](int64_t j0, int64_t j1) { fn(m, g.k, x, g.b, g.ldb, j0, j1, g.c, g.ldc, g.alpha, g.beta); });
}

// C = beta * C (k == 0 or alpha == 0: no products to add).
void scale_c(int64_t m, int64_t n, float* c, int64_t ldc, float beta) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
}

template <class TA, class TB>
void gemm_dispatch(const GemmKernels& kern, const GemmArgs<TA, TB>& g, const ThreadPool& pool) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0 || g.alpha == 0.f) return scale_c(g.m, g.n, g.c, g.ldc, g.beta);
  // Skinny M is decode: a few rows of x against weights [N, K] read once (x·Wᵀ). Few rows against a
  // row-major [K, N] operand, or a transposed A, are LoRA gradients instead (dA = dhT·X, dBᵀ = hT·dY,
  // dhT = Bᵀ·dYᵀ at rank 16, K = the batch's tokens), where the row-streaming kernels ran at 20-30
  // GFLOP/s on Zen 5 and the blocked path at 120-250 (bench/gemm_bench lora8_*).
  if (!g.trans_a && g.trans_b) {
    if (g.m <= kGemvMaxM) return gemm_skinny(kern, g, pool);
    if constexpr (!std::is_same_v<TB, bf16>) {
      if (kern.gemv_passes && g.m <= kGemvPassMaxM && g.k <= kGemvPassMaxK) return gemm_skinny(kern, g, pool);
    }
    if constexpr (std::is_same_v<TA, bf16> && std::is_same_v<TB, bf16>) {
      if (kern.gemv_nt_dot_bf16 && g.m <= kGemvDotMaxM) return gemm_skinny(kern, g, pool);
    }
  }
  if constexpr (std::is_same_v<TA, bf16> && std::is_same_v<TB, bf16>) {
    if (kern.dot_bf16) return gemm_blocked<TA, TB, uint32_t>(kern, kern.mr_bf16, kern.nr_bf16, kern.dot_bf16, g, pool);
  }
  gemm_blocked<TA, TB, float>(kern, kern.mr, kern.nr, kern.f32, g, pool);
}

}  // namespace

void gemm_with(const GemmKernels& kern, const GemmArgs<float, float>& args, const ThreadPool& pool) {
  gemm_dispatch(kern, args, pool);
}
void gemm_with(const GemmKernels& kern, const GemmArgs<float, bf16>& args, const ThreadPool& pool) {
  gemm_dispatch(kern, args, pool);
}
void gemm_with(const GemmKernels& kern, const GemmArgs<float, f16>& args, const ThreadPool& pool) {
  gemm_dispatch(kern, args, pool);
}
void gemm_with(const GemmKernels& kern, const GemmArgs<bf16, bf16>& args, const ThreadPool& pool) {
  gemm_dispatch(kern, args, pool);
}

void gemm(const GemmArgs<float, float>& args, const ThreadPool& pool) {
  gemm_with(gemm_kernels_for(gemm_selected_isa()), args, pool);
}
void gemm(const GemmArgs<float, bf16>& args, const ThreadPool& pool) {
  gemm_with(gemm_kernels_for(gemm_selected_isa()), args, pool);
}
void gemm(const GemmArgs<float, f16>& args, const ThreadPool& pool) {
  gemm_with(gemm_kernels_for(gemm_selected_isa()), args, pool);
}
void gemm(const GemmArgs<bf16, bf16>& args, const ThreadPool& pool) {
  gemm_with(gemm_kernels_for(gemm_selected_isa()), args, pool);
}

}  // namespace lathe::cpu
