// Token sampling from one row of logits: greedy, temperature, top-k and top-p (nucleus), in that order
// of application (as transformers' logits warpers: temperature, then top-k, then top-p).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace lathe {

struct SamplingOptions {
  float temperature = 0.f;  // finite, >= 0; 0: greedy (argmax, lowest index on ties)
  int top_k = 0;            // >= 0; 0: off
  float top_p = 1.f;        // in (0, 1]; 1: off
  uint64_t seed = 0;
};

// Throws InvalidArgument naming the field when an option is outside the range above.
void check_sampling_options(const SamplingOptions& opts);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& opts);  // checks `opts` (check_sampling_options)
  int32_t sample(const float* logits, int64_t vocab);  // logits [V]

 private:
  SamplingOptions opts_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;  // reused across calls: no per-token allocation
};

}  // namespace lathe
