// Matrix multiply kernels of the CPU backend (row-major, f32 accumulation).
//   C[M, N] = alpha * op(A)[M, K] · op(B)[K, N] + beta * C
// op(A) = A stored [M, K] (lda >= K), or with trans_a A stored [K, M] (lda >= M); likewise op(B) = B
// stored [K, N], or with trans_b B stored [N, K] — the layout of a Linear weight [out, in].
// beta == 0 means C is write-only (its old contents, even NaN, are ignored).
// The fast paths are chosen at run time from the CPU's features (AVX-512 / AVX-512 BF16 / AVX2+FMA+F16C);
// set LATHE_CPU=avx2 or LATHE_CPU=scalar to force a lower tier (used by tests).
#pragma once

#include <cstdint>

#include "lathe/base/thread_pool.h"
#include "lathe/tensor/dtype.h"

namespace lathe::cpu {

template <class TA, class TB>
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  const TA* a = nullptr;
  int64_t lda = 0;
  const TB* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.f, beta = 0.f;
};

// f32 x f32.
void gemm(const GemmArgs<float, float>& args, const ThreadPool& pool);
// f32 activations x bf16 weights (bf16 checkpoints): the decode / prefill path.
void gemm(const GemmArgs<float, bf16>& args, const ThreadPool& pool);
// f32 activations x f16 (IEEE half) weights (f16 checkpoints): the same path, f16 widened exactly to f32.
void gemm(const GemmArgs<float, f16>& args, const ThreadPool& pool);
// bf16 x bf16 (vdpbf16ps where the CPU has it).
void gemm(const GemmArgs<bf16, bf16>& args, const ThreadPool& pool);

// Which instruction tier the dispatcher picked ("avx512bf16", "avx512", "avx2", "scalar").
const char* gemm_isa();
// True when that tier multiplies bf16 x bf16 with a native dot product (vdpbf16ps, picked only where it
// runs at twice the f32 FMA rate: AMD Zen 4/5), i.e. faster than f32 x widened bf16.
bool gemm_has_fast_bf16_dot();

}  // namespace lathe::cpu
