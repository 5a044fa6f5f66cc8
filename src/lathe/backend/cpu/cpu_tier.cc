// cpu_tier(): the gemm's tier choice (gemm.cc, which reads LATHE_CPU), without the bf16 sub-tier.
#include "lathe/backend/cpu/cpu_tier.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

#include "lathe/backend/cpu/gemm_internal.h"

namespace lathe::cpu {
namespace {

CpuTier from_isa(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAvx512Bf16:
    case GemmIsa::kAvx512: return CpuTier::kAvx512;
    case GemmIsa::kAvx2: return CpuTier::kAvx2;
    default: return CpuTier::kScalar;
  }
}

}  // namespace

CpuTier cpu_tier() { return from_isa(gemm_selected_isa()); }
CpuTier cpu_max_tier() { return from_isa(gemm_max_supported_isa()); }

bool cpu_has_avx_vnni() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    // CPUID.(EAX=7, ECX=1):EAX bit 4 (GCC 12's __builtin_cpu_supports does not read this leaf).
    return cpu_max_tier() >= CpuTier::kAvx2 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) &&
           ((eax >> 4) & 1) != 0;
  }();
  return has;
}

bool cpu_use_avx_vnni() {
  static const bool use = [] {
    const char* env = std::getenv("LATHE_AVX_VNNI");
    if (env && std::strcmp(env, "0") == 0) return false;
    if (env && std::strcmp(env, "1") == 0) return cpu_has_avx_vnni();
    return cpu_has_avx_vnni() && cpu_max_tier() == CpuTier::kAvx2;
  }();
  return use;
}

const char* cpu_tier_name(CpuTier tier) {
  static constexpr const char* kNames[] = {"scalar", "avx2", "avx512"};
  return tier < CpuTier::kCount ? kNames[static_cast<int>(tier)] : "?";
}

}  // namespace lathe::cpu
