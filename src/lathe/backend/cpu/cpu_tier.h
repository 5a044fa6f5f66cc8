// The one instruction-tier choice of the CPU backend, for every kernel that dispatches at run time (the
// gemm, AdamW, ...): the best tier the CPU has, lowered by LATHE_CPU=avx512|avx2|scalar, read once so it
// cannot change under a running program. A kernel whose code for a tier is the compiler's vectorisation
// of portable C++ follows the build's -march instead (see docs/benchmarks.md for an AVX2-only build).
#pragma once

#include <cstdint>

namespace lathe::cpu {

enum class CpuTier : uint8_t { kScalar, kAvx2, kAvx512, kCount };

// The tier every dispatching kernel runs (the same choice as the gemm's, without its bf16 sub-tier).
CpuTier cpu_tier();
// Highest tier the CPU can run, ignoring LATHE_CPU (tests loop over the tiers up to it).
CpuTier cpu_max_tier();
// Whether the avx2 tier's integer-dot kernels use AVX-VNNI (VEX vpdpbusd on ymm, as Intel's Alder Lake and
// later client cores have without AVX-512): by default when the CPU has it and AVX-512 is absent (an AVX-512
// CPU runs its VNNI kernels instead, and LATHE_CPU=avx2 there measures what a plain AVX2 CPU runs).
// LATHE_AVX_VNNI=1 turns it on wherever the CPU has it, =0 off. Read once.
bool cpu_use_avx_vnni();
// Whether the CPU has AVX-VNNI at all (tests run its kernels wherever it does).
bool cpu_has_avx_vnni();
// "scalar", "avx2", "avx512".
const char* cpu_tier_name(CpuTier tier);

}  // namespace lathe::cpu
