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
// "scalar", "avx2", "avx512".
const char* cpu_tier_name(CpuTier tier);

}  // namespace lathe::cpu
