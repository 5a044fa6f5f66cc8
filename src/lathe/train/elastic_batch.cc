#include "lathe/train/elastic_batch.h"

#include <algorithm>

#include "lathe/base/error.h"

namespace lathe::train {

std::optional<BatchSplit> split_global_batch(int64_t batch_size, int64_t grad_accum, int64_t eval_batches,
                                             int ref_world, int world, int64_t group) {
  LATHE_CHECK_ARG(batch_size >= 1 && grad_accum >= 1 && ref_world >= 1 && world >= 1 && group >= 1,
                  "split_global_batch: batch_size, grad_accum, world sizes and group must be >= 1");
  const int64_t global = batch_size * grad_accum;
  if (global % (group * world) != 0) return std::nullopt;
  const int64_t per_rank_max = std::max<int64_t>(1, batch_size / ref_world);
  int64_t m = std::min(per_rank_max, global / world);
  while (global % (m * world) != 0) --m;  // ends at m = 1 at the latest: global % world == 0
  BatchSplit s{.batch_size = m * world, .grad_accum = global / (m * world), .eval_batches = eval_batches};
  // Validation: eval.batches batches of batch_size sequences, read from the start of the set.
  const int64_t eval_sequences = eval_batches * batch_size;
  s.eval_batches = (eval_sequences + s.batch_size - 1) / s.batch_size;
  s.eval_kept = eval_sequences % s.batch_size == 0;
  return s;
}

int elastic_world_size(int64_t batch_size, int64_t grad_accum, int min_world, int max_world, int available,
                       int64_t group) {
  for (int w = std::min(max_world, available); w >= std::max(1, min_world); --w)
    if ((batch_size * grad_accum) % (group * w) == 0) return w;
  return 0;
}

}  // namespace lathe::train
