// Keeping the global batch when an elastic job (`lathe launch`) changes its number of ranks. A step's
// global batch is G = data.batch_size · data.grad_accum sequences (batch_size is summed over the ranks,
// docs/recipes.md) and the data loader hands out global samples by cursor, so any split of G into
// micro-batches trains on the same samples in the same step; only the order of the float sums changes.
// The split keeps a rank's micro-batch (its activation memory) at most what the recipe gives it on
// ref_world ranks, and makes up the rest with gradient accumulation: 2 ranks × 2 sequences × accum 1 ->
// 1 rank × 2 sequences × accum 2. A GRPO step's batch comes in groups (the num_generations completions of a
// prompt, sampled and scored on one rank): then every rank's share must hold whole groups.
#pragma once

#include <cstdint>
#include <optional>

namespace lathe::train {

struct BatchSplit {
  int64_t batch_size = 0;    // data.batch_size: sequences per micro-batch, over all ranks (a multiple of world)
  int64_t grad_accum = 1;    // data.grad_accum: batch_size · grad_accum = the recipe's G
  int64_t eval_batches = 0;  // eval.batches: the same validation sequences (batches of batch_size)
  bool eval_kept = true;     // false: eval.batches · batch_size could not be kept exactly (rounded up)
};

// The split of the recipe's global batch for `world` ranks: the largest per-rank micro-batch m' at most
// max(1, batch_size / ref_world) for which G is a multiple of m' · world. nullopt when G is not a
// multiple of group · `world` (no split keeps the global batch in whole groups per rank).
std::optional<BatchSplit> split_global_batch(int64_t batch_size, int64_t grad_accum, int64_t eval_batches,
                                             int ref_world, int world, int64_t group = 1);

// The most ranks in [min_world, min(max_world, available)] whose split keeps the global batch; 0 when
// none does.
int elastic_world_size(int64_t batch_size, int64_t grad_accum, int min_world, int max_world, int available,
                       int64_t group = 1);

}  // namespace lathe::train
