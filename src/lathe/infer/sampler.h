// Token sampling from one row of logits: greedy, temperature, top-k and top-p (nucleus), in that order
// of application (as transformers' logits warpers: temperature, then top-k, then top-p).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace lathe {

struct SamplingOptions {
  float temperature = 0.f;  // 0: greedy (argmax, lowest index on ties)
  int top_k = 0;            // 0: off
  float top_p = 1.f;        // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& opts) : opts_(opts), rng_(opts.seed) {}
  int32_t sample(const float* logits, int64_t vocab);  // logits [V]

 private:
  SamplingOptions opts_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> scratch_;  // reused across calls: no per-token allocation
};

}  // namespace lathe
