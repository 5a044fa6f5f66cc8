// DAPO dynamic sampling (grpo_dynamic_sampling.h) over a scripted sampler: groups whose rewards do not vary
// are dropped, each refill round asks for exactly the missing groups, and when max_rounds runs out the first
// dropped groups fill the rest; the counts say what happened.
#include "lathe/posttrain/grpo_dynamic_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace lathe::posttrain {
namespace {

constexpr int64_t kG = 3;

// A group of G trajectories whose prompt is {id} and whose rewards are `r` (one function).
std::vector<Trajectory> group(int32_t id, std::vector<double> r) {
  std::vector<Trajectory> out;
  for (double x : r) out.push_back({.prompt = {id}, .completion = {1}, .rewards = {x}});
  return out;
}

struct Script {
  std::vector<std::vector<std::vector<Trajectory>>> rounds;  // [round][group] -> G trajectories
  std::vector<int64_t> asked;                                // n_prompts asked in each round
  std::vector<Trajectory> operator()(int64_t round, int64_t n) {
    asked.push_back(n);
    std::vector<Trajectory> out;
    for (int64_t k = 0; k < n; ++k) {
      const auto& grp = rounds.at(static_cast<size_t>(round)).at(static_cast<size_t>(k));
      out.insert(out.end(), grp.begin(), grp.end());
    }
    return out;
  }
};

std::vector<int32_t> prompts_of(const std::vector<Trajectory>& trs) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < trs.size(); i += kG) ids.push_back(trs[i].prompt[0]);
  return ids;
}

TEST(GrpoDynamicSampling, DropsFlatGroupsAndRefillsThem) {
  constexpr double kNa = std::numeric_limits<double>::quiet_NaN();
  Script s;
  s.rounds = {{group(1, {1, 0, 0}), group(2, {1, 1, 1}), group(3, {0, 0, 0})},
              {group(4, {kNa, kNa, kNa}), group(5, {0, 0.5, 0})},  // all N/A: A = 0, no signal
              {group(6, {2, 2, 2})}};
  GrpoDynamicSamplingStats st;
  const auto sample = [&](int64_t r, int64_t n) { return s(r, n); };
  // Round 0 keeps 1; round 1 asks for 2 and keeps 5; round 2 asks for 1 and drops 6; round 3 has no script:
  // so cap the rounds at 2 to end there and put back the first dropped group (2).
  EXPECT_THROW(grpo_dynamic_sample(3, kG, 5, {}, sample, &st), std::out_of_range);  // it wanted a round 3
  s.asked.clear();
  std::vector<Trajectory> trs = grpo_dynamic_sample(3, kG, 2, {}, sample, &st);
  EXPECT_EQ(s.asked, (std::vector<int64_t>{3, 2, 1}));
  EXPECT_EQ(prompts_of(trs), (std::vector<int32_t>{1, 5, 2}));
  EXPECT_EQ(st.dropped_groups, 4);  // 2, 3, 4, 6
  EXPECT_EQ(st.refill_rounds, 2);
  EXPECT_EQ(st.kept_zero_std_groups, 1);
  // No rounds at all: the batch as sampled, signal first.
  s.asked.clear();
  trs = grpo_dynamic_sample(3, kG, 0, {}, sample, &st);
  EXPECT_EQ(s.asked, (std::vector<int64_t>{3}));
  EXPECT_EQ(prompts_of(trs), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(st.dropped_groups, 2);
  EXPECT_EQ(st.refill_rounds, 0);
  EXPECT_EQ(st.kept_zero_std_groups, 2);
}

TEST(GrpoDynamicSampling, StopsAsSoonAsTheBatchIsFull) {
  Script s;
  s.rounds = {{group(1, {1, 0, 0}), group(2, {1, 1, 1})}, {group(3, {0, 1, 1})}};
  GrpoDynamicSamplingStats st;
  const std::vector<Trajectory> trs =
      grpo_dynamic_sample(2, kG, 3, {}, [&](int64_t r, int64_t n) { return s(r, n); }, &st);
  EXPECT_EQ(s.asked, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(prompts_of(trs), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(st.dropped_groups, 1);
  EXPECT_EQ(st.refill_rounds, 1);
  EXPECT_EQ(st.kept_zero_std_groups, 0);
}

}  // namespace
}  // namespace lathe::posttrain
