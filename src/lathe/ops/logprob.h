// Per-token log-probabilities log_softmax(logits)[i, ids[i]]: the quantity every post-training loss
// (DPO, GRPO/PPO ratios, KL to a reference) is built from.
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

// out[...] = logits[..., ids[...]] − logsumexp(logits[..., :]).  logits [..., V] f32; ids [...] i32 in
// [0, V) (else InvalidArgument naming the id) -> out [...] f32. Gradient: dlogits[i] = g_i·(onehot −
// softmax(logits[i])), softmax recomputed in backward from the saved logits and lse [N].
Tensor token_logprobs(const Tensor& logits, const Tensor& ids);

}  // namespace lathe
