#include "lathe/serve/loadgen/dataset.h"

#include <cmath>
#include <limits>
#include <random>

#include "lathe/base/error.h"

namespace lathe::loadgen {
namespace {

// A length drawn uniformly from [len * (1 - r), len * (1 + r)], at least 1.
int64_t draw_length(std::mt19937_64& rng, int64_t len, double r) {
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(len) * (1 - r))));
  const int64_t hi = std::max<int64_t>(lo, static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1 + r))));
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

}  // namespace

std::vector<BenchRequest> random_dataset(const RandomDatasetOptions& o) {
  LATHE_CHECK_ARG(o.n_requests >= 1, "[bench serve] --num-prompts must be >= 1, got ", o.n_requests);
  LATHE_CHECK_ARG(o.input_len >= 1, "[bench serve] --input-len must be >= 1, got ", o.input_len);
  LATHE_CHECK_ARG(o.output_len >= 1, "[bench serve] --output-len must be >= 1, got ", o.output_len);
  LATHE_CHECK_ARG(o.range_ratio >= 0 && o.range_ratio < 1, "[bench serve] --range-ratio must be in [0, 1), got ",
                  o.range_ratio);
  LATHE_CHECK_ARG(o.prefix_len >= 0, "[bench serve] --prefix-len must be >= 0, got ", o.prefix_len);
  LATHE_CHECK_ARG(o.vocab_size >= 1 && o.vocab_size <= std::numeric_limits<int32_t>::max(),
                  "[bench serve] --vocab-size must be in [1, 2^31), got ", o.vocab_size);
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(o.vocab_size - 1));
  std::vector<int32_t> prefix(static_cast<size_t>(o.prefix_len));
  for (int32_t& t : prefix) t = token(rng);
  std::vector<BenchRequest> out(static_cast<size_t>(o.n_requests));
  for (BenchRequest& r : out) {
    const int64_t own = draw_length(rng, o.input_len, o.range_ratio);
    r.max_tokens = draw_length(rng, o.output_len, o.range_ratio);
    r.prompt = prefix;
    for (int64_t i = 0; i < own; ++i) r.prompt.push_back(token(rng));
  }
  return out;
}

std::vector<double> arrival_times(int64_t n, double request_rate, double burstiness, uint64_t seed) {
  LATHE_CHECK_ARG(request_rate > 0, "[bench serve] --request-rate must be > 0 (or inf), got ", request_rate);
  LATHE_CHECK_ARG(burstiness > 0 && std::isfinite(burstiness), "[bench serve] --burstiness must be > 0, got ",
                  burstiness);
  std::vector<double> t(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(request_rate)) return t;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  // Gamma(shape k, scale 1 / (rate k)) has mean 1 / rate; k = 1 is the exponential of a Poisson process.
  std::gamma_distribution<double> gap(burstiness, 1.0 / (request_rate * burstiness));
  double now = 0;
  for (size_t i = 1; i < t.size(); ++i) t[i] = now += gap(rng);
  return t;
}

}  // namespace lathe::loadgen
