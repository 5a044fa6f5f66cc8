// Scalar reference of per-token log-probabilities (log_softmax gathered at the given ids), in double.
#pragma once

#include <cstdint>

#include "lathe/ref/cross_entropy.h"

namespace lathe::ref {

// out[i] = logits[i, ids[i]] − lse(logits[i, :]).  logits [n, v], ids [n] in range, out [n].
template <class T>
void token_logprobs(const T* logits, const int32_t* ids, int64_t n, int64_t v, double* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = logits[i * v + ids[i]] - logsumexp(logits + i * v, v);
}

}  // namespace lathe::ref
