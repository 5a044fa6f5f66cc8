// The logits processors that run before temperature (serving spec §6 order): min_tokens masking and
// logit_bias, then the repetition, frequency and presence penalties. Each edits one row z [V] in place
// and touches only the tokens it concerns (sparse: O(prompt + output), not O(V)).
#pragma once

#include <cstdint>
#include <span>

#include "lathe/infer/sampling_state.h"

namespace lathe {

// While the state's output is shorter than min_tokens, z[EOS and stop_token_ids] = -inf; then
// z[id] += bias for each logit_bias entry.
void apply_min_tokens_and_logit_bias(const SamplingState& s, float* z /* [V] */);

// Penalties in vLLM's order, each token once: repetition (tokens of prompt or output: z > 0 ? z / r :
// z · r), then z −= frequency · count_out(v) + presence · [count_out(v) > 0]. `counts` [V] is zero on
// entry and on return (shared scratch: the output's counts are built and cleared each call).
void apply_penalties(const SamplingState& s, float* z /* [V] */, std::span<int32_t> counts /* [V] */);

}  // namespace lathe
