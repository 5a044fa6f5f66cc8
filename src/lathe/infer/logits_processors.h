// The logits processors that run before temperature (serving spec §6 order): the allowed_token_ids
// whitelist, bad words, min_tokens masking and logit_bias, then the repetition, frequency and presence
// penalties. Each edits one row z [V] and touches only the tokens it concerns (sparse: O(prompt + output
// + banned sequences), not O(V)), except the whitelist's one O(V) fill, which replaces the row's copy.
#pragma once

#include <cstdint>
#include <span>

#include "lathe/infer/sampling_state.h"

namespace lathe {

// z = x for the allowed_token_ids (every id when the list is empty), -inf for the others: the row's
// processed copy starts here (vLLM masks with a [B, V] boolean tensor; a sparse copy needs no mask).
void copy_allowed_logits(const SamplingState& s, const float* x /* [V] */, float* z /* [V] */);

// z[last id of a banned sequence] = -inf when the output so far ends with the sequence's other ids (a
// one-token sequence: always). Output tokens only, not the prompt (vLLM's past_tokens_ids).
void apply_bad_words(const SamplingState& s, float* z /* [V] */);

// While the state's output is shorter than min_tokens, z[EOS and stop_token_ids] = -inf; then
// z[id] += bias for each logit_bias entry.
void apply_min_tokens_and_logit_bias(const SamplingState& s, float* z /* [V] */);

// Penalties in vLLM's order, each token once: repetition (tokens of prompt or output: z > 0 ? z / r :
// z · r), then z −= frequency · count_out(v) + presence · [count_out(v) > 0]. `counts` [V] is zero on
// entry and on return (shared scratch: the output's counts are built and cleared each call).
void apply_penalties(const SamplingState& s, float* z /* [V] */, std::span<int32_t> counts /* [V] */);

}  // namespace lathe
