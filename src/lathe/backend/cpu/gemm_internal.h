// Internals of the CPU gemm shared by the dispatcher (gemm.cc), the per-ISA micro-kernels
// (gemm_avx512.cc, gemm_avx2.cc, gemm_scalar.cc) and the tests, which force each tier in turn.
// Packed layouts (Goto/BLIS): an A micro-panel is [kc][MR] (k-major, MR rows side by side, zero-padded),
// a B micro-panel is [kc][NR], both f32 whatever the stored type (bf16 and f16 widen while packing); for
// bf16 pairs (vdpbf16ps) A is [kc/2][MR] u32 and B is [kc/2][NR][2] bf16.
#pragma once

#include <cstdint>
#include <type_traits>

#include "lathe/backend/cpu/cache_info.h"
#include "lathe/backend/cpu/gemm.h"

// Function attributes of the AVX-512 kernels (gemm_avx512.cc, gemv_avx512.cc), compiled for their tier
// whatever the build's -march; the dispatcher calls them only where the CPU has it.
#define LATHE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define LATHE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
// The AVX2 + FMA tier's kernels (gemm_avx2.cc, gemv_avx2.cc), likewise; with F16C (vcvtph2ps, f16 weights),
// which every AVX2 CPU has and the dispatcher checks.
#define LATHE_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace lathe::cpu {

enum class GemmIsa : uint8_t { kScalar, kAvx2, kAvx512, kAvx512Bf16, kCount };

// The AVX-512 decode GEMVs (f32, bf16, quantised) stream W from memory once, 4 rows at a time: each step also
// requests the same line of the rows kGemvPrefetchTiles tiles on, into L2 (_MM_HINT_T1), which keeps more
// misses in flight than L1. On Zen 5 at 25 GB/s read bandwidth this ran 1.05-1.3x (f32) and 1.2-2.2x (int8 /
// int4, VNNI) the rate of requesting the next tile into L1; 2 and 4 tiles did about as well, into L1 (NTA)
// worse (docs/benchmarks.md, 2026-12-07).
inline constexpr int kGemvPrefetchTiles = 3;

// C[m, n] (m <= MR, n <= NR, row stride ldc) = alpha * Apanel · Bpanel + beta * C; beta == 0: write-only.
using MicroKernelF32 = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n,
                                float alpha, float beta);
// Same on bf16 pairs: kc2 = ceil(kc / 2) pair steps; a = [kc2][MR] u32, b = [kc2][NR] u32 (bf16 pairs).
using MicroKernelBf16 = void (*)(int64_t kc2, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m,
                                 int n, float alpha, float beta);

// Skinny-M paths (decode of up to kGemvMaxM sequences): W is read from memory once for all rows of x.
// y[i, j] = alpha * sum_p x[i, p] * W(p, j) + beta * y[i, j] for i < m, j in [j0, j1);
// x is [m, k] contiguous (ldx = k), W stored [N, K] ("nt": x·Wᵀ, a Linear's layout; the only one decode
// has, and the only one the dispatcher sends here).
// The SIMD "nt" kernels take x in groups of rows per block of W rows (kGemvGroup on AVX-512, 2 on AVX2: the
// accumulators of one group fill the registers; the block stays in L1/L2 for the next group). Every kernel sums each output
// in an order that does not depend on m, so row i of a call with m rows equals the same row computed
// alone, bit for bit: batched decode gives each sequence the tokens it gets by itself.
template <class TW>
using GemvFn = void (*)(int m, int64_t k, const float* x, const TW* w, int64_t ldw, int64_t j0, int64_t j1,
                        float* y, int64_t ldy, float alpha, float beta);
inline constexpr int kGemvMaxM = 16;
// The bf16 x bf16 dot kernel below runs 8 rows of x per pass over a block of W held in L2, so it reads W
// from memory once for up to this many rows, without the blocked path's packing of all of W (which cost as
// much as the products at M = 33: a 32-token prompt after a cached prefix). Against the blocked path on
// Zen 5 (gemm_bench BM_Decode_Bf16xBf16, K 768 / 2048): 1.15-1.35x at M = 24 and 32, 1.0-1.1x at 48, even
// at 64.
inline constexpr int kGemvDotMaxM = 48;
inline constexpr int kGemvGroup = 4;
// f32 and f16 W on the AVX-512 tiers (gemv_avx512.cc's multi-pass path): up to kGemvPassMaxM rows of x go to
// the skinny kernel when k <= kGemvPassMaxK, where 8 rows of x fit in L1 beside the W lines; 1.1-1.7x the
// tiled and blocked paths for m 8-48 at K 768 on Zen 5, level at 48 (gemv_avx512.cc).
inline constexpr int kGemvPassMaxM = 48;
inline constexpr int64_t kGemvPassMaxK = 1024;
// The same "nt" product with x in bf16 too (a bf16 model's decode, its activations rounded to bf16), rows of
// x ldx apart: pairs of both feed the bf16 dot instruction directly, no f32 copy of x and no widening of W.
using GemvDotBf16Fn = void (*)(int m, int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw, int64_t j0,
                               int64_t j1, float* y, int64_t ldy, float alpha, float beta);

// The AVX-512 tier's skinny-M kernels (gemv_avx512.cc): "nt" sums 4 W rows at once with the next 4 rows
// prefetched, one 64-byte line of each row per step (16 f32, 32 bf16 widened by shifts, or 32 f16 widened by
// vcvtph2ps).
void gemv_nt_f32_avx512(int m, int64_t k, const float* x, const float* w, int64_t ldw, int64_t j0, int64_t j1,
                        float* y, int64_t ldy, float alpha, float beta);
void gemv_nt_bf16_avx512(int m, int64_t k, const float* x, const bf16* w, int64_t ldw, int64_t j0, int64_t j1,
                         float* y, int64_t ldy, float alpha, float beta);
void gemv_nt_f16_avx512(int m, int64_t k, const float* x, const f16* w, int64_t ldw, int64_t j0, int64_t j1,
                        float* y, int64_t ldy, float alpha, float beta);

// The AVX-512 BF16 tier's bf16 x bf16 "nt" kernel (gemv_avx512_bf16.cc): vdpbf16ps on 32-wide steps of
// x and W rows, up to 8 rows of x per pass over W.
void gemv_nt_dot_bf16_avx512bf16(int m, int64_t k, const bf16* x, int64_t ldx, const bf16* w, int64_t ldw, int64_t j0,
                                 int64_t j1, float* y, int64_t ldy, float alpha, float beta);

// The AVX2 tier's skinny-M kernels (gemv_avx2.cc): 4 W rows summed at once with the next block of rows
// prefetched, bf16 widened by shifts, f16 by vcvtph2ps.
void gemv_nt_f32_avx2(int m, int64_t k, const float* x, const float* w, int64_t ldw, int64_t j0, int64_t j1,
                      float* y, int64_t ldy, float alpha, float beta);
void gemv_nt_bf16_avx2(int m, int64_t k, const float* x, const bf16* w, int64_t ldw, int64_t j0, int64_t j1,
                       float* y, int64_t ldy, float alpha, float beta);
void gemv_nt_f16_avx2(int m, int64_t k, const float* x, const f16* w, int64_t ldw, int64_t j0, int64_t j1,
                      float* y, int64_t ldy, float alpha, float beta);

// Transposing pack: dst[p * stride + r] = src[r * ld + p] for r < rows, p < kc, and 0 for rows <= r <
// stride (stride = MR or NR). Packs A when not trans_a, and a Linear weight B [N, K] when trans_b.
template <class T>
using PackTransposeFn = void (*)(const T* src, int64_t ld, int rows, int64_t kc, int stride, float* dst);

struct GemmKernels {
  GemmIsa isa;
  int mr, nr;  // f32 micro tile
  MicroKernelF32 f32;
  int mr_bf16 = 0, nr_bf16 = 0;  // 0: no bf16 dot instruction; bf16 x bf16 widens to f32 then
  MicroKernelBf16 dot_bf16 = nullptr;
  GemvFn<float> gemv_nt_f32;
  GemvFn<bf16> gemv_nt_bf16;
  GemvFn<f16> gemv_nt_f16;
  GemvDotBf16Fn gemv_nt_dot_bf16 = nullptr;  // nullptr: bf16 x goes to f32 and takes gemv_nt_bf16
  bool gemv_passes = false;  // gemv_nt_f32 / _f16 take up to kGemvPassMaxM rows when k <= kGemvPassMaxK
  PackTransposeFn<float> pack_t_f32 = nullptr;  // nullptr: the portable loop in gemm.cc
  PackTransposeFn<bf16> pack_t_bf16 = nullptr;
  PackTransposeFn<f16> pack_t_f16 = nullptr;
};

// The tier's skinny-M kernel for weight type TW (W [N, K]).
template <class TW>
GemvFn<TW> gemv_for(const GemmKernels& kern) {
  if constexpr (std::is_same_v<TW, float>) return kern.gemv_nt_f32;
  else if constexpr (std::is_same_v<TW, bf16>) return kern.gemv_nt_bf16;
  else return kern.gemv_nt_f16;
}

// Per-tier tables (defined in gemm_<isa>.cc); the AVX ones are only valid where the CPU has the ISA.
const GemmKernels& gemm_kernels_scalar();
const GemmKernels& gemm_kernels_avx2();
const GemmKernels& gemm_kernels_avx512();
const GemmKernels& gemm_kernels_avx512_bf16();

// Best tier this CPU supports, lowered by LATHE_CPU=avx512|avx2|scalar (read once).
GemmIsa gemm_selected_isa();
// Highest tier the CPU can run (ignores LATHE_CPU); the tests loop over tiers up to it.
GemmIsa gemm_max_supported_isa();
const GemmKernels& gemm_kernels_for(GemmIsa isa);

// Block sizes of the blocked driver for an MR x NR tile (gemm.cc says how they follow from the caches):
// kc K steps per packed panel, nc columns per packed B chunk (a multiple of nr), a_block packed A elements.
struct GemmBlocking {
  int64_t kc = 0, nc = 0, a_block = 0;
};
GemmBlocking gemm_blocking_for(const CacheInfo& caches, int mr, int nr);

// The drivers with an explicit tier (the public gemm() passes gemm_selected_isa()).
void gemm_with(const GemmKernels& kern, const GemmArgs<float, float>& args, const ThreadPool& pool);
void gemm_with(const GemmKernels& kern, const GemmArgs<float, bf16>& args, const ThreadPool& pool);
void gemm_with(const GemmKernels& kern, const GemmArgs<float, f16>& args, const ThreadPool& pool);
void gemm_with(const GemmKernels& kern, const GemmArgs<bf16, bf16>& args, const ThreadPool& pool);

}  // namespace lathe::cpu
