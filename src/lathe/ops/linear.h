// Linear layer and plain matmul: the GEMM-backed ops every block is built from.
#pragma once

#include <utility>

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = x · wᵀ + b.  x [..., in] f32; w [out, in] f32, bf16 or f16 (16-bit checkpoints, widened exactly to f32
// in the kernels; no weight gradient); b [out] or undefined -> y [..., out] f32.
// bf16 compute (mixed-precision training): x and w both bf16 (to_bf16, bf16_compute_weight), f32
// accumulation; the backward gives f32 dx = g·w and f32 dw = gᵀ·x, and keeps x in bf16.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// A low-rank term on a linear's output (a LoRA adapter, nn/lora.h): scaling · (x·aᵀ)·bᵀ.
struct LowRankTerm {
  Tensor x;             // [..., in] its input: the linear's own x (the same tensor), or e.g. a dropout of it
  Tensor a;             // [R, in] f32, or bf16 (a compute copy) when x is bf16
  Tensor b;             // [out, R] f32
  float scaling = 1.f;
};

// y = x · wᵀ + b + term.scaling · (term.x · term.aᵀ) · term.bᵀ in one op: the rank-R product is added into
// y by the GEMM (no [..., out] temporary, no separate add), and when term.x is x itself the backward adds
// its share of dx into the base's dx the same way. Gradients reach x, w, b, term.x, term.a, term.b.
// The rank-R intermediate is kept rank-major ([R, tokens]), the layout in which its four products are
// blocked GEMMs of wide rows rather than 16-column ones.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const LowRankTerm& term);

// {linear(x, w0, b0), linear(x, w1, b1)}: two projections of one input (gate and up; k and v), the same
// results and gradients; on a 2-thread pool two equal-shaped GEMMs run side by side, one thread each.
std::pair<Tensor, Tensor> linear_pair(const Tensor& x, const Tensor& w0, const Tensor& w1,
                                      const Tensor& b0 = Tensor(), const Tensor& b1 = Tensor());
// The same with an optional low-rank term on each (null: none).
std::pair<Tensor, Tensor> linear_pair(const Tensor& x, const Tensor& w0, const Tensor& w1, const Tensor& b0,
                                      const Tensor& b1, const LowRankTerm* t0, const LowRankTerm* t1);

// c = a · b (2-D).  a [M, K], b [K, N] f32 -> c [M, N].
Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace lathe
