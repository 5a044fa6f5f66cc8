// `lathe distill-cache`: runs a distillation recipe's teacher once over its training data, under no-grad, and
// writes its top-k logits at every trained position to a teacher cache (teacher_cache.h) that
// distill.teacher_logits then reads in place of the teacher (docs/distill.md "The teacher cache").
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "lathe/train/recipe.h"

namespace lathe::posttrain {

struct DistillCacheResult {
  int64_t n_sources = 0;  // sequences the teacher ran over
  int64_t n_rows = 0;     // positions cached
  int64_t k = 0;
  int64_t bytes = 0;      // the file's size
};

// cfg: a resolved recipe whose distill: section names distill.teacher and distill.top_k > 0 (InvalidArgument
// otherwise). The student (model.base or model.config) is opened for its encoder only. Reads and encodes the data
// exactly as lathe distill does (SftObjective), runs the teacher on data.batch_size sequences at a time and the head
// distill.chunk_rows positions at a time (no [N, V] logits), and writes `out` crash-safely. Single-process; threads
// from run.threads.
DistillCacheResult write_distill_cache(train::TrainConfig cfg, const std::string& out,
                                       const std::function<void(const std::string&)>& note);

}  // namespace lathe::posttrain
