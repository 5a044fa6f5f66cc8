// On-policy distillation batches (specs/posttrain.md §6, TRL GKDTrainer.generate_on_policy_outputs): an SFT batch
// whose completions are replaced by sampled ones. Each example of the batch (each source span: a packed example
// keeps its own positions and attention, so it is a sequence of its own) splits into its prompt and its
// completion; the completion is the example's last run of trained positions (a prompt-completion row's
// completion, a conversation's last assistant turn: TRL's collator takes messages[:-1] as the prompt), the
// prompt everything before it, earlier assistant turns included. The rebuilt example is prompt + sample: the
// prompt's tokens and positions untouched, every sampled token a trained target (the stop token included), the
// prompt untrained, the last token without a target. Examples keep their order, so the batch is packed as the
// data path packed it (one sequence per example, padding-free).
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/posttrain/sft_rows.h"

namespace lathe::posttrain {

// The prompt of every example of b, in order ([b.sources.size()]): its tokens up to and including the one whose
// target starts its last trained run (an example with no trained target: all its tokens).
std::vector<std::vector<int32_t>> example_prompts(const SftBatch& b);

// b with example k's completion replaced by completions[k] (its prompt as example_prompts gives it; an example
// without trained targets is kept as it is, its completion ignored). n_targets counts the new targets;
// step_targets is 0 (the caller sets the step's count). InvalidArgument unless there is one completion per
// example.
SftBatch with_completions(const SftBatch& b, const std::vector<std::vector<int32_t>>& completions);

}  // namespace lathe::posttrain
