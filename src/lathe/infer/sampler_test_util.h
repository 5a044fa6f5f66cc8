#pragma once

#include <cstddef>
#include <span>

#include "lathe/infer/sampler.h"
#include "lathe/infer/sampling_state.h"

namespace lathe {

// Heap held by the sampler's scratch and every row's state: constant once warm (the no-allocation tests).
inline size_t sampler_heap_footprint(const Sampler& sampler, std::span<const SamplingState> states) {
  size_t b = sampler.heap_bytes();
  for (const SamplingState& s : states) b += s.heap_bytes();
  return b;
}

}  // namespace lathe
