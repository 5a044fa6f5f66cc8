// y = x · deq(W)ᵀ for a quantised Linear weight W [n, k] (tensor/quant_weight.h). Decode (m <= 16 rows of
// x) runs a GEMV that reads the packed codes once and dequantises them in registers (or, with AVX-512 VNNI,
// meets them with int8 activations in integer dot products), the n rows of W split over the pool's
// workers; prefill (more rows) runs an int8 GEMM on repacked W (AVX-512 VNNI, or the avx2 tier's vpmaddubsw /
// AVX-VNNI), elsewhere (nf4, scalar, AVX-512 without VNNI) dequantises a block of W rows at a time into an f32
// panel and runs the f32 GEMM on it. The tier follows cpu_tier() (LATHE_CPU lowers it).
#pragma once

#include <cstdint>

#include "lathe/backend/cpu/cpu_tier.h"
#include "lathe/base/thread_pool.h"
#include "lathe/tensor/dtype.h"
#include "lathe/tensor/quant_weight.h"

namespace lathe::cpu {

// A validated view of a QuantWeight: row j's codes at codes + j * quant_row_bytes(format, k), its scales
// (and mins) at + j * k / group. k is a multiple of the group size. nf4: codes are the flattened weight's
// (element j·k + p), absmax its blocks' absmax (spec.group = blocksize; any k).
struct QuantMatrix {
  QuantSpec spec;
  int64_t n = 0, k = 0;
  const uint8_t* codes = nullptr;  // [n, row bytes]; nf4 [ceil(n·k / 2)]
  const f16* scales = nullptr;     // [n, k / group]; nf4: null
  const f16* mins = nullptr;       // [n, k / group] for int4-asym, else null
  const float* absmax = nullptr;   // nf4: [ceil(n·k / blocksize)], else null
};

// y[i, j] (=|+=) Σ_p x[i, p] · deq(W)[j, p] for i < m, j < n; x [m, k] rows ldx apart, y [m, n] rows ldy apart.
// accumulate: add to y (a bias seeded there); else y is write-only. On an AVX-512 VNNI CPU (tier avx512) the
// decode rows take quant_gemm_vnni: x rounded to int8 per 32 inputs, within Σ|w|·dx/2 of the f32 result.
void quant_gemm(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy, bool accumulate,
                const ThreadPool& pool);

// The same with an explicit tier (tests run every tier the CPU has).
void quant_gemm_with(CpuTier tier, int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                     bool accumulate, const ThreadPool& pool);

// Rows of x up to which the decode GEMV runs (beyond: dequantised panels and the f32 GEMM).
inline constexpr int kQuantGemvMaxM = 16;

// The decode GEMV of one tier on W rows [j0, j1): the kernels the dispatcher splits over workers. Every
// output is summed in an order that depends on k only, so row i of an m-row call equals row i alone.
using QuantGemvFn = void (*)(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                             int64_t ldy, bool accumulate);
void quant_gemv_scalar(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate);
void quant_gemv_avx2(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate);
void quant_gemv_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                       int64_t ldy, bool accumulate);

// NF4's decode GEMV (nf4_gemv_*.cc): k a multiple of the blocksize (each row starts a block and a byte);
// other shapes take quant_gemv_scalar.
void nf4_gemv_avx2(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                   int64_t ldy, bool accumulate);
void nf4_gemv_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                     int64_t ldy, bool accumulate);

// dx[i, p] (=|+=) Σ_j dy[i, j] · deq(W)[j, p]: the input gradient through a frozen quantised weight (QLoRA's
// backward). W's rows are dequantised a panel at a time and met by the f32 GEMM. dy [m, n] rows lddy apart,
// dx [m, k] rows lddx apart.
void quant_gemm_dx(int64_t m, const float* dy, int64_t lddy, const QuantMatrix& w, float* dx, int64_t lddx,
                   bool accumulate, const ThreadPool& pool);

// The integer-dot decode path (AVX-512 VNNI, quant_gemv_avx512_vnni.cc): x quantised per unit of 32 inputs
// to int8 (ref::quantize_activation_unit), laid out per block of W codes (64 bytes: 2 int8 units or 4 int4
// units) in the order the format's codes load.
struct QuantActivations {
  int m = 0;
  int64_t blocks = 0, groups = 0;  // ceil(units / units per block) blocks; k / group groups
  int64_t block_bytes = 0;         // x codes per block: 64 (int8) or 128 (int4: low then high nibbles' inputs)
  int8_t* xq = nullptr;            // [m][blocks][block_bytes], 64-byte aligned
  float* dx = nullptr;             // [m][blocks][16]: each int32 lane's unit scale dx, 64-byte aligned
  float* t = nullptr;              // [m][groups]: Σ over the group's units of dx · Σ xq
};
// Units of 32 inputs per 64-byte block of codes.
inline int64_t quant_units_per_block(QuantFormat f) { return f == QuantFormat::kInt8 ? 2 : 4; }
// True when this CPU has AVX-512 VNNI (vpdpbusd).
bool quant_cpu_has_vnni();
// y (=|+=) x · deq(W)ᵀ through int8 activations, m <= kQuantGemvMaxM; only where quant_cpu_has_vnni().
void quant_gemm_vnni(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                     bool accumulate, const ThreadPool& pool);
// The prefill GEMM through int8 activations (quant_gemm_avx512_vnni.cc): any m, formats int8 / int4 / int6 /
// int4-asym; each worker repacks 32 W rows at a time into vpdpbusd's operand order. Only where
// quant_cpu_has_vnni(). Rounds x as quant_gemm_vnni does (ref::quant_matmul_q8_activations is its definition).
void quant_gemm_vnni_prefill(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                             bool accumulate, const ThreadPool& pool);
void quantize_activations_avx512(int m, const float* x, int64_t ldx, const QuantMatrix& w, QuantActivations& a);
void quant_gemv_avx512_vnni(const QuantActivations& a, const QuantMatrix& w, int64_t j0, int64_t j1, float* y,
                            int64_t ldy, bool accumulate);

// The integer-dot decode path for CPUs without AVX-512 VNNI (quant_gemv_avx2_int.cc: AVX2 vpmaddubsw), any
// m (meant for m <= kQuantGemvMaxM): x rounded to int8 per 32 inputs as quant_gemm_vnni does.
void quant_gemm_avx2_int(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                         bool accumulate, const ThreadPool& pool);

// x row (k inputs) quantised per unit of 32 as ref::quantize_activation_unit: codes xq in input order,
// dx per unit, T_g = Σ_{u in g} dx_u·Σxq_u per group of `group_units` units (t may be null: not written),
// corr_u = -off·Σxq_u (off 0: Σxq_u). The AVX2 integer paths' activations.
void quantize_activation_row_avx2(const float* x, int64_t k, int64_t group_units, int off, int8_t* xq, float* dx,
                                  float* t, int32_t* corr);
// The AVX2 prefill GEMM through int8 activations (quant_gemm_avx2_prefill.cc): any m, formats int8 / int4 /
// int6 / int4-asym, W repacked 8 rows at a time into vpmaddubsw's operand order. Rounds x as
// quant_gemm_avx2_int does.
void quant_gemm_avx2_prefill(int64_t m, const float* x, int64_t ldx, const QuantMatrix& w, float* y, int64_t ldy,
                             bool accumulate, const ThreadPool& pool);
// The same with vpdpbusd (AVX-VNNI) or without (vpmaddubsw) chosen by the caller; the plain call takes
// cpu_use_avx_vnni(). avx_vnni only where cpu_has_avx_vnni() (asserted).
void quant_gemm_avx2_prefill_with(bool avx_vnni, int64_t m, const float* x, int64_t ldx, const QuantMatrix& w,
                                  float* y, int64_t ldy, bool accumulate, const ThreadPool& pool);

// Dequantises W rows [j0, j1) into dst [j1 - j0, k] f32 (the prefill panels; the scalar definition), and the
// same in AVX2 (bit-equal; the panels of the avx2 and avx512 tiers).
void quant_dequantize_rows(const QuantMatrix& w, int64_t j0, int64_t j1, float* dst);
void quant_dequantize_rows_avx2(const QuantMatrix& w, int64_t j0, int64_t j1, float* dst);

}  // namespace lathe::cpu
