#include "lathe/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "lathe/base/error.h"

namespace lathe::train {
namespace {

TEST(LrSchedule, WarmupThenCosineToTheFinalFraction) {
  LrSchedule s{.kind = "cosine", .peak = 1.0, .warmup_steps = 4, .total_steps = 14, .final_fraction = 0.1};
  s.validate();
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);                                  // p = 0
  EXPECT_NEAR(s.at(9), 0.1 + 0.5 * (1 + std::cos(M_PI * 0.5)) * 0.9, 1e-15);  // p = 1/2
  EXPECT_NEAR(s.at(14), 0.1, 1e-15);                               // p = 1
  for (int64_t t = 5; t < 14; ++t) EXPECT_LT(s.at(t), s.at(t - 1));
}

TEST(LrSchedule, LinearConstantAndWsd) {
  LrSchedule lin{.kind = "linear", .peak = 2.0, .warmup_steps = 0, .total_steps = 10, .final_fraction = 0.0};
  EXPECT_DOUBLE_EQ(lin.at(0), 2.0);
  EXPECT_DOUBLE_EQ(lin.at(5), 1.0);
  LrSchedule c{.kind = "constant", .peak = 0.5, .warmup_steps = 2, .total_steps = 10};
  EXPECT_DOUBLE_EQ(c.at(0), 0.25);
  EXPECT_DOUBLE_EQ(c.at(9), 0.5);
  // WSD: constant until D = 0.8 S = 80, then 1 - sqrt(p).
  LrSchedule w{.kind = "wsd", .peak = 1.0, .warmup_steps = 10, .total_steps = 100, .final_fraction = 0.0,
               .decay_fraction = 0.2};
  EXPECT_DOUBLE_EQ(w.at(50), 1.0);
  EXPECT_DOUBLE_EQ(w.at(79), 1.0);
  EXPECT_DOUBLE_EQ(w.at(80), 1.0);
  EXPECT_NEAR(w.at(85), 1.0 - std::sqrt(0.25), 1e-15);
  w.decay_style = "linear";
  EXPECT_NEAR(w.at(90), 0.5, 1e-15);
}

TEST(LrSchedule, RejectsBadSettings) {
  EXPECT_THROW((LrSchedule{.kind = "step"}.validate()), InvalidArgument);
  EXPECT_THROW((LrSchedule{.warmup_steps = 5, .total_steps = 4}.validate()), InvalidArgument);
  EXPECT_THROW((LrSchedule{.total_steps = 0}.validate()), InvalidArgument);
}

}  // namespace
}  // namespace lathe::train
