// cpu_tier(): the gemm's tier choice (gemm.cc, which reads LATHE_CPU), without the bf16 sub-tier.
#include "lathe/backend/cpu/cpu_tier.h"

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

const char* cpu_tier_name(CpuTier tier) {
  static constexpr const char* kNames[] = {"scalar", "avx2", "avx512"};
  return tier < CpuTier::kCount ? kNames[static_cast<int>(tier)] : "?";
}

}  // namespace lathe::cpu
