// Row kernels of the softmax family: stable (max-shifted) log-sum-exp, its online form over pieces of
// a row, the entropy sums, and the softmax-minus-onehot gradient row.
#include "lathe/ops/softmax_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

// The ternary (not std::max, which GCC 12 leaves scalar here: 9x slower) vectorises to vmaxps. A NaN
// entry may be skipped by the max, but it still makes Σ exp, hence the row's lse, NaN.
float row_max(const float* x, int64_t v) {
  float m = kNegInf;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < v; ++j) m = m > x[j] ? m : x[j];
  return m;
}

float row_sum_exp(const float* x, float m, int64_t v) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < v; ++j) s += vec::exp(x[j] - m);
  return s;
}

float row_logsumexp(const float* x, int64_t v) {
  const float m = row_max(x, v);
  if (m == kNegInf) return kNegInf;  // every entry masked out: log 0
  return m + std::log(row_sum_exp(x, m, v));
}

void row_softmax_backward(const float* x, float lse, float scale, int64_t target, float* d, int64_t v) {
#pragma omp simd
  for (int64_t j = 0; j < v; ++j) d[j] = scale * vec::exp(x[j] - lse);
  if (target >= 0) d[target] -= scale;
}

void row_logsumexp_update(const float* x, int64_t v, float* max, float* sum) {
  const float m_new = std::max(*max, row_max(x, v));
  if (m_new == kNegInf) return;
  *sum = *sum * std::exp(*max - m_new) + row_sum_exp(x, m_new, v);
  *max = m_new;
}

void row_entropy_update(const float* x, int64_t v, float* max, float* sum, float* shifted) {
  const float m_new = std::max(*max, row_max(x, v));
  if (m_new == kNegInf) return;
  float s = 0.f, t = 0.f;
#pragma omp simd reduction(+ : s, t)
  for (int64_t j = 0; j < v; ++j) {
    const float d = x[j] - m_new, e = vec::exp(d);
    s += e;
    t += e * d;
  }
  // Re-shifting the earlier pieces from m to m_new: e·(x − m_new) = e·(x − m) + e·(m − m_new).
  if (*sum > 0.f) {
    const float alpha = std::exp(*max - m_new);
    *shifted = alpha * (*shifted + (*max - m_new) * *sum) + t;
    *sum = alpha * *sum + s;
  } else {
    *shifted = t;
    *sum = s;
  }
  *max = m_new;
}

}  // namespace lathe
