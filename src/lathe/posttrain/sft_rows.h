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

// A run of a row's tokens that is one source row (see source_rows): its index there and its length.
struct SourceSpan {
  int64_t index = 0;
  int64_t tokens = 0;
};

struct SftRow {
  std::vector<int32_t> tokens;     // [n]
  std::vector<int32_t> positions;  // [n]: from 0 in each example (wrapped: in each row)
  std::vector<int32_t> targets;    // [n]: the trained next token, or -100
  int64_t n_targets = 0;
  std::vector<SourceSpan> sources;  // the source rows it holds, in order, covering [0, n)
};

// One example as a row (positions 0..n-1); its source is {index, n}.
SftRow example_row(const TokenizedExample& ex, int64_t index = 0);

// The rows of `examples` (in order; bfd: in pack_bfd's row order). Wrapped rows without any trained target
// are dropped.
std::vector<SftRow> build_rows(std::span<const TokenizedExample> examples, Packing packing, int64_t max_length);

// The source rows of build_rows' rows, rebuilt from them: the units a row is a concatenation of, each of
// which a forward runs as if it were alone. Without packing and with bfd, each example (a packed example
// keeps its positions and attends only within itself); wrapped, the rows themselves (their attention crosses
// examples). In index order; packing none and bfd give the same ones, whatever batch or shuffle. The
// distillation teacher cache (teacher_cache.h) is keyed by them.
std::vector<SftRow> source_rows(std::span<const SftRow> rows);

// A micro-batch: rows concatenated, padding-free.
struct SftBatch {
  std::vector<int32_t> tokens, positions, targets;  // [N]
  std::vector<SourceSpan> sources;                  // the rows' source rows, in order, covering [0, N)
  int64_t n_targets = 0;    // trained targets in this batch
  double step_targets = 0;  // trained targets of the whole optimizer step (all micro-batches, all ranks): the
                            // loss denominator (0: this batch's own n_targets)
  void append(const SftRow& r);
  // The forward batch: each example a sequence of its own (a new one wherever positions restart).
  ForwardBatch forward_batch() const { return ForwardBatch::packed(tokens, positions); }
};

}  // namespace lathe::posttrain
