// The compute-peak loops behind machine_limits.h, header-only and free of lathe dependencies so that the
// stand-alone bench/peak_fma.cc runs the very same instructions. Each loop carries its own target
// attribute (correct whatever the build's -march) and must only be called where cpu_has() is true: on a
// CPU without the ISA it dies with SIGILL.
// Independent accumulator chains hide the latency: 4-6 cycles x 2 ports needs >= 8-12 in flight. AVX2 has
// 16 ymm registers (12 chains + 2 constants fit), AVX-512 32 zmm (16 chains).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace lathe::cpu::peak_loops {

inline constexpr int kChainsYmm = 12, kChainsZmm = 16;

// Each loop returns a value derived from every accumulator, so none can be optimised away.
__attribute__((target("avx2,fma"))) inline float fma_avx2(int64_t iters, float seed) {
  __m256 acc[kChainsYmm];
  for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChainsYmm; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return out[0] + out[7];
}

__attribute__((target("avx512f"))) inline float fma_avx512(int64_t iters, float seed) {
  __m512 acc[kChainsZmm];
  for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  for (int i = 1; i < kChainsZmm; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0] + out[15];
}

// bf16 pairs (1.0, 1.0) x (2^-24, 2^-24): the sums grow slowly and stay normal.
__attribute__((target("avx512f,avx512bf16"))) inline float dot_bf16_avx512(int64_t iters, float seed) {
  __m512 acc[kChainsZmm];
  for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x33803380);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  }
  for (int i = 1; i < kChainsZmm; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0] + out[15];
}

// u8 x s8 products of 1 x 1, four summed into each int32 lane (wrapping harmlessly).
__attribute__((target("avx512f,avx512vnni"))) inline float dot_int8_avx512vnni(int64_t iters, float seed) {
  __m512i acc[kChainsZmm];
  for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_set1_epi32(static_cast<int>(seed) + i);
  const __m512i x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChainsZmm; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], x, y);
  }
  for (int i = 1; i < kChainsZmm; ++i) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
  int32_t out[16];
  _mm512_storeu_si512(out, acc[0]);
  return static_cast<float>(out[0] + out[15]);
}

__attribute__((target("avx2,avxvnni"))) inline float dot_int8_avxvnni(int64_t iters, float seed) {
  __m256i acc[kChainsYmm];
  for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_set1_epi32(static_cast<int>(seed) + i);
  const __m256i x = _mm256_set1_epi8(1), y = _mm256_set1_epi8(1);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kChainsYmm; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], x, y);
  }
  for (int i = 1; i < kChainsYmm; ++i) acc[0] = _mm256_add_epi32(acc[0], acc[i]);
  int32_t out[8];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), acc[0]);
  return static_cast<float>(out[0] + out[7]);
}

inline bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
inline bool has_avx512f() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}
inline bool has_avx512_bf16() { return has_avx512f() && __builtin_cpu_supports("avx512bf16"); }
inline bool has_avx512_vnni() { return has_avx512f() && __builtin_cpu_supports("avx512vnni"); }
inline bool has_avx_vnni() { return has_avx2_fma() && __builtin_cpu_supports("avxvnni"); }

struct Loop {
  const char* name;         // "fp32_fma_avx512"
  const char* instruction;  // "vfmadd231ps zmm"
  const char* unit;         // "GFLOP/s", or "GOP/s" for the int8 dot
  bool (*cpu_has)();
  float (*run)(int64_t iters, float seed);
  double ops_per_iter;  // flops (int8: multiply and add count one op each) of one iteration over all chains
};

// In machine_limits.h's ComputePeak order.
inline constexpr Loop kLoops[] = {
    {"fp32_fma_avx2", "vfmadd231ps ymm", "GFLOP/s", has_avx2_fma, fma_avx2, 2.0 * 8 * kChainsYmm},
    {"fp32_fma_avx512", "vfmadd231ps zmm", "GFLOP/s", has_avx512f, fma_avx512, 2.0 * 16 * kChainsZmm},
    // vdpbf16ps: 2 products and 2 adds per 32-bit lane.
    {"bf16_dot_avx512bf16", "vdpbf16ps zmm", "GFLOP/s", has_avx512_bf16, dot_bf16_avx512, 4.0 * 16 * kChainsZmm},
    // vpdpbusd: 4 products and 4 adds per 32-bit lane.
    {"int8_dot_avx512vnni", "vpdpbusd zmm", "GOP/s", has_avx512_vnni, dot_int8_avx512vnni, 8.0 * 16 * kChainsZmm},
    {"int8_dot_avxvnni", "vpdpbusd ymm (VEX)", "GOP/s", has_avx_vnni, dot_int8_avxvnni, 8.0 * 8 * kChainsYmm},
};

}  // namespace lathe::cpu::peak_loops
