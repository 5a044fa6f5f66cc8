// Row kernels of the softmax family shared by cross_entropy, token_logprobs and the vocabulary-chunked
// heads (contiguous f32, inputs already validated, single-threaded: callers parallelise over rows).
#pragma once

#include <cstdint>

namespace lathe {

// max_j x[j] over v values (−inf for v == 0).
float row_max(const float* x, int64_t v);
// Σ_j exp(x[j] − m).
float row_sum_exp(const float* x, float m, int64_t v);
// log Σ_j exp(x[j]) over v values (max-shifted, f32 lane sums).
float row_logsumexp(const float* x, int64_t v);
// d[j] = scale·(exp(x[j] − lse) − [j == target]); target < 0: no one-hot term. d may alias x.
void row_softmax_backward(const float* x, float lse, float scale, int64_t target, float* d, int64_t v);

// Online log-sum-exp over a row seen in pieces: *max and *sum (start at −inf and 0) hold the running max
// m and Σ exp(x − m) of the pieces so far; adds x [v], rescaling the sum when the max grows. The row's
// lse is then m + log(sum).
void row_logsumexp_update(const float* x, int64_t v, float* max, float* sum);
// The same plus *shifted (starts at 0) = Σ exp(x − m)·(x − m), for the entropy of softmax(x):
// H = log(sum) − shifted/sum (shifting by m keeps both terms O(log V), with no cancellation of large x).
void row_entropy_update(const float* x, int64_t v, float* max, float* sum, float* shifted);

}  // namespace lathe
