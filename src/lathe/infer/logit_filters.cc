#include "lathe/infer/logit_filters.h"

#include <algorithm>
#include <limits>

#include "lathe/infer/row_reduce.h"
#include "lathe/ops/vec_math.h"

namespace lathe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// a ranks before b: larger mass first, lower id among equal masses (the TokenRank order, as e is
// monotone in z).
bool mass_before(const MassId& a, const MassId& b) { return a.e > b.e || (a.e == b.e && a.id < b.id); }

double mass_sum(const MassId* c, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += c[i].e;
  return s;
}

// Reorders c[0..n) so that c[0..cut) is the smallest best-ranked prefix (mass_before) whose mass
// reaches target, and returns cut: a quickselect on mass (expected O(n), no full sort).
int64_t nucleus_select(MassId* c, int64_t n, double target) {
  int64_t lo = 0, hi = n;
  double above = 0;  // mass of c[0..lo): in the nucleus
  while (hi - lo > 32) {
    // Median of three distinct keys: at least one element of the range ranks after the pivot, so the
    // range always shrinks.
    MassId a = c[lo], b = c[lo + (hi - lo) / 2], d = c[hi - 1];
    if (mass_before(b, a)) std::swap(a, b);
    if (mass_before(d, b)) std::swap(b, d);
    if (mass_before(b, a)) std::swap(a, b);
    const MassId pivot = b;
    MassId* mid = std::partition(c + lo, c + hi, [&](const MassId& x) { return !mass_before(pivot, x); });
    const int64_t m = mid - c;
    const double upper = mass_sum(c + lo, m - lo);  // c[lo..m): ranked up to the pivot, the pivot included
    if (above + upper >= target) {
      hi = m;
    } else {
      above += upper;
      lo = m;
    }
  }
  std::sort(c + lo, c + hi, mass_before);
  for (int64_t i = lo; i < hi; ++i) {
    above += c[i].e;
    if (above >= target) return i + 1;
  }
  return hi;
}

}  // namespace

int32_t argmax_lowest(const float* z, int64_t V) {
  const int64_t v = row::find_first_equal(z, V, row::max_value(z, V));
  return static_cast<int32_t>(std::max<int64_t>(v, 0));
}

void select_top_k(const float* z, int64_t V, int64_t k, int32_t* ids) {
  // A heap of the k best so far whose top is the worst of them; scanning ids upwards, a later token
  // displaces it only with a strictly larger z (on a tie the lower id, already held, ranks first).
  const TokenRank rank{z};
  for (int64_t v = 0; v < k; ++v) ids[v] = static_cast<int32_t>(v);
  std::make_heap(ids, ids + k, rank);
  float worst = z[ids[0]];
  for (int64_t v = k; v < V; ++v) {
    if (!(z[v] > worst)) continue;
    std::pop_heap(ids, ids + k, rank);
    ids[k - 1] = static_cast<int32_t>(v);
    std::push_heap(ids, ids + k, rank);
    worst = z[ids[0]];
  }
  std::sort_heap(ids, ids + k, rank);
}

float apply_temperature_and_exp(float* z, float* e, int64_t V, float temperature) {
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) z[v] = z[v] / temperature;
  const float m = row::max_value(z, V);
  if (!(m > kNegInf)) return m;  // nothing finite: the caller falls back to argmax
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) e[v] = vec::exp(z[v] - m);
  return m;
}

void apply_min_p(float* z, float* e, int64_t V, float min_p) {
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) {
    const bool keep = e[v] >= min_p;
    e[v] = vec::select(keep, e[v], 0.f);
    z[v] = vec::select(keep, z[v], kNegInf);
  }
}

void apply_top_k(float* z, float* e, int64_t V, int64_t k, int32_t* ids) {
  select_top_k(z, V, k, ids);
  const int32_t last = ids[k - 1];  // the worst kept token: everything ranked after it goes
  const float zl = z[last];
#pragma omp simd
  for (int64_t v = 0; v < V; ++v) {
    const bool keep = z[v] > zl || (z[v] == zl && v <= last);
    e[v] = vec::select(keep, e[v], 0.f);
    z[v] = vec::select(keep, z[v], kNegInf);
  }
}

void apply_top_p(float* z, float* e, int64_t V, float top_p, std::span<const int32_t> survivors,
                 std::span<MassId> pairs) {
  int64_t n = 0;
  double total = 0;
  auto take = [&](int32_t v) {
    if (e[v] > 0.f) {
      pairs[n++] = {e[v], v};
      total += e[v];
    }
  };
  if (survivors.empty()) {
    // Prune before selecting: if the tokens with e > t already hold the target mass, every token with
    // e <= t ranks after all of them and is out. Try t = 2^-1, 2^-2, ... (e_max = 1) by vectorised
    // masked sums; a peaked distribution leaves a few candidates, a flat one keeps t = 0 (no pruning).
    const double all = row::sum_f64(V, [e](int64_t v) { return e[v]; });
    const double target = static_cast<double>(top_p) * all;
    float t = 0.f;
    for (const float cand : {0x1.0p-1f, 0x1.0p-2f, 0x1.0p-4f, 0x1.0p-8f, 0x1.0p-16f, 0x1.0p-32f}) {
      if (row::sum_f64(V, [e, cand](int64_t v) { return e[v] > cand ? e[v] : 0.f; }) >= target) {
        t = cand;
        break;
      }
    }
    if (t > 0.f) {
#pragma omp simd
      for (int64_t v = 0; v < V; ++v) {
        const bool keep = e[v] > t;
        e[v] = vec::select(keep, e[v], 0.f);
        z[v] = vec::select(keep, z[v], kNegInf);
      }
    }
    for (int64_t v = 0; v < V; ++v) take(static_cast<int32_t>(v));
    total = all;  // the pruned tokens' mass still counts in the target
  } else {
    for (const int32_t v : survivors) take(v);
  }
  if (n == 0) return;
  const int64_t cut = nucleus_select(pairs.data(), n, static_cast<double>(top_p) * total);
  for (int64_t i = cut; i < n; ++i) {
    e[pairs[i].id] = 0.f;
    z[pairs[i].id] = kNegInf;
  }
}

int32_t sample_inverse_cdf(const float* e, int64_t V, double u, std::span<double> block_sums) {
  const int64_t n_blocks = (V + kSampleBlock - 1) / kSampleBlock;
  double total = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t end = std::min(V, (b + 1) * kSampleBlock);
    const float* eb = e + b * kSampleBlock;
    const double s = row::sum_f64(end - b * kSampleBlock, [eb](int64_t i) { return eb[i]; });
    block_sums[b] = s;
    total += s;
  }
  const double target = u * total;
  double acc = 0;
  int32_t last_positive = 0;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (block_sums[b] == 0) continue;
    if (acc + block_sums[b] <= target && b + 1 < n_blocks) {
      acc += block_sums[b];
      continue;
    }
    // The draw lands in this block (or, by rounding, past the last one): walk it token by token.
    const int64_t end = std::min(V, (b + 1) * kSampleBlock);
    for (int64_t v = b * kSampleBlock; v < end; ++v) {
      if (e[v] <= 0.f) continue;
      acc += e[v];
      last_positive = static_cast<int32_t>(v);
      if (acc > target) return last_positive;
    }
    if (b + 1 == n_blocks || acc > target) break;  // rounding left the draw unplaced: keep walking
  }
  return last_positive;
}

}  // namespace lathe
