// The sampling stage after the processors (serving spec §6 order): greedy argmax, or temperature → min_p
// → top-k → top-p → a categorical draw. A row is z [V] (processed logits; a filtered token becomes -inf)
// with e [V] = exp(z − max z) beside it (0 for a filtered token): the unnormalised probabilities.
#pragma once

#include <cstdint>
#include <span>

namespace lathe {

// The lowest index of the largest z (greedy; ties go to the lowest id). NaN entries are never chosen
// unless every entry is NaN or -inf (then 0).
int32_t argmax_lowest(const float* z, int64_t V);

// Ranking used by every selection here: larger z first, lower id first among equal z.
struct TokenRank {
  const float* z;
  bool operator()(int32_t a, int32_t b) const { return z[a] > z[b] || (z[a] == z[b] && a < b); }
};

// ids[0..k) = the k best-ranked tokens of z, best first (a heap scan: O(V) compares, O(k log k) moves).
// k in [1, V]; ids has room for k entries.
void select_top_k(const float* z, int64_t V, int64_t k, int32_t* ids);

// z /= temperature, then e = exp(z − max z); returns max z (the max survives every filter below).
float apply_temperature_and_exp(float* z, float* e, int64_t V, float temperature);

// min_p: drop v when e_v < min_p (e_v = p_v / p_max).
void apply_min_p(float* z, float* e, int64_t V, float min_p);

// top-k: keep the k best-ranked tokens (k in [1, V)); ids [V] is scratch, left holding them in [0, k).
void apply_top_k(float* z, float* e, int64_t V, int64_t k, int32_t* ids);

// top-p over the current survivors (e > 0; after top-k its ids[0..k) are passed as `survivors`, else all
// of [0, V) are scanned): keep the smallest best-ranked set whose mass reaches top_p · total (>= 1 token).
// `pairs` [V] is scratch.
struct MassId {
  float e;
  int32_t id;
};
void apply_top_p(float* z, float* e, int64_t V, float top_p, std::span<const int32_t> survivors,
                 std::span<MassId> pairs);

// Inverse-CDF draw from e (unnormalised, >= 0, some > 0) in index order with u in [0, 1): the first v
// whose cumulative mass exceeds u · Σe. `block_sums` has room for ceil(V / kSampleBlock) entries.
inline constexpr int64_t kSampleBlock = 512;
int32_t sample_inverse_cdf(const float* e, int64_t V, double u, std::span<double> block_sums);

}  // namespace lathe
