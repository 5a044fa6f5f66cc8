// A DPO micro-batch: k preference pairs as 2k sequences packed padding-free (chosen 0..k−1, then rejected
// k..2k−1, as TRL's concatenated forward), each with positions from 0 and attention of its own. Every
// position inside a sequence predicts its next token (ORPO's NLL covers the prompt too); `completion` marks
// the targets that are response tokens, the ones the sequence log-prob log π(y|x) sums.
// A KTO micro-batch has the same layout: its k unpaired examples first, then their k KL sequences (each
// example's prompt with the answer of another example of the micro-batch), which estimate z0.
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
  // KTO only (empty for pairs):
  std::vector<uint8_t> desirable;                   // [k]: each example's label
  std::vector<int64_t> kl_answer_ids;               // [k]: the dataset index of the answer of KL sequence j
  int64_t n_pairs() const { return static_cast<int64_t>(pair_ids.size()); }
  ForwardBatch forward_batch() const { return ForwardBatch::packed(tokens, positions); }
};

// The batch of `pairs` (pairs[j] has dataset index ids[j]).
DpoBatch make_dpo_batch(std::span<const PreferencePair* const> pairs, std::span<const int64_t> ids);

// Unpaired preference data (KTO): prompt + completion, trained on the completion, and its label.
struct UnpairedExamples {
  std::vector<TokenizedExample> examples;
  std::vector<uint8_t> desirable;  // [examples.size()]
  size_t size() const { return examples.size(); }
};

// The KL sequence of KTO: x's prompt (its tokens before the first trained one) followed by y's answer (y's
// tokens from its first trained one, with their mask), cut to max_length tokens (0: no limit).
TokenizedExample kl_sequence(const TokenizedExample& x, const TokenizedExample& y, int64_t max_length);

// The KTO batch of the examples d[ids[j]] (k >= 2): KL sequence j is example j's prompt with the answer of
// example (j − 1) mod k, TRL's shift by one inside the batch (KTOTrainer._get_kl_dataset), so the
// mismatched answers are the batch's own answers.
DpoBatch make_kto_batch(const UnpairedExamples& d, std::span<const int64_t> ids, int64_t max_length);

// Per-sequence sums of `token_logprobs` [N] over the response tokens -> [2k] (double sums of the f32 values).
std::vector<double> sequence_logps(const DpoBatch& b, std::span<const float> token_logprobs);

}  // namespace lathe::posttrain
