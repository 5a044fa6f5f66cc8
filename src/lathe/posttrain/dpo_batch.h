// A DPO micro-batch: k preference pairs as 2k sequences packed padding-free (chosen 0..k−1, then rejected
// k..2k−1, as TRL's concatenated forward), each with positions from 0 and attention of its own. Every
// position inside a sequence predicts its next token (ORPO's NLL covers the prompt too); `completion` marks
// the targets that are response tokens, the ones the sequence log-prob log π(y|x) sums.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "lathe/models/forward_batch.h"
#include "lathe/posttrain/example_encoder.h"

namespace lathe::posttrain {

using PreferencePair = std::pair<TokenizedExample, TokenizedExample>;  // {prompt + chosen, prompt + rejected}

struct DpoBatch {
  std::vector<int32_t> tokens, positions, targets;  // [N]: targets -100 at each sequence's last token
  std::vector<int32_t> seq;                         // [N]: the sequence of each token (0..2k−1)
  std::vector<uint8_t> completion;                  // [N]: 1 where the target is a response token
  std::vector<int64_t> pair_ids;                    // [k]: each pair's index in its dataset (reference cache)
  std::vector<int64_t> completion_len;              // [2k]: |y| of each sequence
  int64_t n_pairs() const { return static_cast<int64_t>(pair_ids.size()); }
  ForwardBatch forward_batch() const { return ForwardBatch::packed(tokens, positions); }
};

// The batch of `pairs` (pairs[j] has dataset index ids[j]).
DpoBatch make_dpo_batch(std::span<const PreferencePair* const> pairs, std::span<const int64_t> ids);

// Per-sequence sums of `token_logprobs` [N] over the response tokens -> [2k] (double sums of the f32 values).
std::vector<double> sequence_logps(const DpoBatch& b, std::span<const float> token_logprobs);

}  // namespace lathe::posttrain
