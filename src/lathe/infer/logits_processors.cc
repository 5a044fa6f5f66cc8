#include "lathe/infer/logits_processors.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

namespace lathe {

void copy_allowed_logits(const SamplingState& s, const float* x, float* z) {
  const std::span<const int32_t> allowed = s.params().allowed_token_ids;
  const auto V = static_cast<size_t>(s.vocab());
  if (allowed.empty()) {
    std::memcpy(z, x, V * sizeof(float));
    return;
  }
  std::fill(z, z + V, -std::numeric_limits<float>::infinity());
  for (const int32_t id : allowed) z[id] = x[id];
}

void apply_bad_words(const SamplingState& s, float* z) {
  const std::span<const int32_t> out = s.output();
  for (const std::vector<int32_t>& word : s.params().bad_words_token_ids) {
    const size_t n_prefix = word.size() - 1;
    if (n_prefix > out.size()) continue;  // the output is too short to end with the prefix
    if (std::equal(word.begin(), word.end() - 1, out.end() - static_cast<std::ptrdiff_t>(n_prefix)))
      z[word.back()] = -std::numeric_limits<float>::infinity();
  }
}

void apply_min_tokens_and_logit_bias(const SamplingState& s, float* z) {
  const SamplingParams& p = s.params();
  if (static_cast<int64_t>(s.output().size()) < p.min_tokens)
    for (const int32_t id : s.min_tokens_mask()) z[id] = -std::numeric_limits<float>::infinity();
  for (const auto& [id, bias] : p.logit_bias) z[id] += bias;
}

void apply_penalties(const SamplingState& s, float* z, std::span<int32_t> counts) {
  const SamplingParams& p = s.params();
  const float r = p.repetition_penalty, freq = p.frequency_penalty, pres = p.presence_penalty;
  if (r == 1.f && freq == 0.f && pres == 0.f) return;
  auto repeat = [r](float x) { return x > 0.f ? x / r : x * r; };
  const std::span<const int32_t> out = s.output();
  for (const int32_t t : out) ++counts[t];
  // Output tokens: all three penalties; counts[t] = -1 marks t done (its later copies are skipped).
  for (const int32_t t : out) {
    const int32_t c = counts[t];
    if (c <= 0) continue;
    float x = r == 1.f ? z[t] : repeat(z[t]);
    x -= freq * static_cast<float>(c);  // two steps, as the formula (and vLLM) apply them
    x -= pres;
    z[t] = x;
    counts[t] = -1;
  }
  // Prompt tokens that are not in the output: repetition only.
  if (r != 1.f)
    for (const int32_t t : s.prompt_distinct())
      if (counts[t] == 0) z[t] = repeat(z[t]);
  for (const int32_t t : out) counts[t] = 0;
}

}  // namespace lathe
