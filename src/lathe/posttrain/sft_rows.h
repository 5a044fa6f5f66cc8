// SFT training rows: tokenized examples laid out as the forward runs them. A row is one example, or
// several packed by best-fit decreasing (each with positions from 0 and its own attention), or with
// `wrapped` packing a max_length slice of all examples concatenated (attention crosses examples: opt-in).
// Targets are the next token where it is trained, -100 elsewhere; the last token of an example has none,
// so the loss never crosses an example boundary.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "lathe/models/forward_batch.h"
#include "lathe/posttrain/example_encoder.h"
#include "lathe/posttrain/sft_options.h"

namespace lathe::posttrain {

struct SftRow {
  std::vector<int32_t> tokens;     // [n]
  std::vector<int32_t> positions;  // [n]: from 0 in each example (wrapped: in each row)
  std::vector<int32_t> targets;    // [n]: the trained next token, or -100
  int64_t n_targets = 0;
};

// One example as a row (positions 0..n-1).
SftRow example_row(const TokenizedExample& ex);

// The rows of `examples` (in order; bfd: in pack_bfd's row order). Wrapped rows without any trained target
// are dropped.
std::vector<SftRow> build_rows(std::span<const TokenizedExample> examples, Packing packing, int64_t max_length);

// A micro-batch: rows concatenated, padding-free.
struct SftBatch {
  std::vector<int32_t> tokens, positions, targets;  // [N]
  int64_t n_targets = 0;    // trained targets in this batch
  double step_targets = 0;  // trained targets of the whole optimizer step (all micro-batches, all ranks): the
                            // loss denominator (0: this batch's own n_targets)
  void append(const SftRow& r);
  // The forward batch: each example a sequence of its own (a new one wherever positions restart).
  ForwardBatch forward_batch() const { return ForwardBatch::packed(tokens, positions); }
};

}  // namespace lathe::posttrain
