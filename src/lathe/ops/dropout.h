// Inverted dropout with a counter-based mask: element i survives when draw i of CounterRng{key} is >= p,
// so the mask is a pure function of (key, i). A recomputed layer (autograd checkpoint) redraws the same
// mask, and a resumed run the same masks, for any thread count.
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// y = x ⊙ keep / (1 - p).  x [...] f32 or bf16 (a bf16-compute matmul input) -> y [...] of x's dtype;
// p in [0, 1); p = 0 returns x itself. Gradient: dx = g ⊙ keep / (1 - p) (f32).
Tensor dropout(const Tensor& x, float p, uint64_t key);

}  // namespace lathe
