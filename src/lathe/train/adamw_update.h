// The elementwise AdamW update (adamw.h has the formula), one kernel per CPU tier. AdamW::step splits the
// parameters into chunks and calls adamw_update on each with the tier of cpu::cpu_tier(); the tests call
// each tier directly against the portable loop.
#pragma once

#include <cstdint>

#include "lathe/backend/cpu/cpu_tier.h"

namespace lathe::train {

// The per-step constants of the update (see AdamW::step).
struct AdamWScalars {
  float grad_scale, b1, b2, step_size, inv_sqrt_bc2, eps, decay;
};

// theta[j], m[j], v[j] updated in place from grad[j] for j < n ([n] each). Every tier computes
// g = grad * grad_scale; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g;
// theta -= step_size m / (sqrt(v) inv_sqrt_bc2 + eps) + decay theta, with IEEE division and square root.
// The SIMD tiers give the same bits wherever the buffers are aligned (a resumed run reproduces them).
void adamw_update(cpu::CpuTier tier, float* theta, float* m, float* v, const float* grad, int64_t n,
                  const AdamWScalars& s);

}  // namespace lathe::train
