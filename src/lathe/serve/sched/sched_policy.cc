// The scheduler's policy functions (sched_policy.h).
#include "lathe/serve/sched/sched_policy.h"

#include <algorithm>
#include <cmath>

#include "lathe/models/paged_kv_store.h"

namespace lathe {

Chunk chunk_for(int64_t remaining, const StepBudget& budget, const SchedulerConfig& config) {
  int64_t n = std::min(remaining, budget.tokens_left);
  if (config.long_prefill_token_threshold > 0) n = std::min(n, config.long_prefill_token_threshold);
  if (n <= 0) return {};
  const bool partial = n < remaining;
  if (partial && budget.partial_slots_left <= 0) return {};
  return {.n_tokens = n, .partial = partial};
}

int64_t output_reservation_blocks(int64_t n_prompt, int64_t max_output, int block_size) {
  return kv_blocks_for(n_prompt, block_size) + kv_blocks_for(max_output, block_size);
}

int64_t watermark_blocks(double watermark, int64_t n_usable_blocks) {
  return static_cast<int64_t>(std::ceil(watermark * static_cast<double>(n_usable_blocks)));
}

bool reservation_fits(int64_t reserved_blocks, int64_t seq_reservation, int64_t n_usable_blocks, int64_t watermark) {
  return reserved_blocks + seq_reservation <= n_usable_blocks - watermark;
}

bool chunk_fits(int64_t n_new_blocks, int64_t n_free_blocks, int64_t watermark) {
  return n_new_blocks <= n_free_blocks - watermark;
}

}  // namespace lathe
