// What `lathe bench serve` sends (spec serving.md section 11, after `vllm bench serve`): a random dataset
// of token-id prompts (any OpenAI-compatible server takes a prompt as a list of ids, so no tokenizer is
// needed and the server counts exactly the tokens sent) and the times the requests go out.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe::loadgen {

struct RandomDatasetOptions {
  int64_t n_requests = 100;
  int64_t input_len = 256, output_len = 128;  // per request, before the range ratio
  double range_ratio = 0.0;  // lengths uniform in [len * (1 - r), len * (1 + r)], r in [0, 1)
  int64_t prefix_len = 0;    // tokens every prompt starts with (shared-prefix runs), before input_len own ones
  int64_t vocab_size = 32000;  // ids drawn uniformly from [0, vocab_size)
  uint64_t seed = 0;
};

struct BenchRequest {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;  // sent with ignore_eos, so the output has exactly this many tokens
};

// Throws InvalidArgument naming the option when one is out of range.
std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& opts);

// Send times in seconds from the start, non-decreasing: all 0 when request_rate is infinite, else
// gamma-distributed gaps with mean 1 / request_rate and shape `burstiness` (1 = Poisson arrivals).
std::vector<double> arrival_times(int64_t n, double request_rate, double burstiness, uint64_t seed);

}  // namespace lathe::loadgen
