// The median's distribution-free interval and the verdict against a bar, on fixed samples.
#include <cmath>

#include <gtest/gtest.h>

#include "harness/util/median_interval.h"

namespace tc::stats {
namespace {

TEST(MedianInterval, CoverageFromTheBinomialOrderStatistics) {
  // n = 6: k = 1, coverage 1 - 2/64; n = 9: k = 2, coverage 1 - 2*10/512; n = 5: none reaches 95%.
  auto six = median_interval({6, 1, 5, 2, 4, 3});
  ASSERT_TRUE(six.has_interval);
  EXPECT_EQ(six.k, 1);
  EXPECT_DOUBLE_EQ(six.coverage, 1.0 - 2.0 / 64);
  EXPECT_DOUBLE_EQ(six.median, 3.5);
  EXPECT_DOUBLE_EQ(six.lo, 1);
  EXPECT_DOUBLE_EQ(six.hi, 6);
  auto nine = median_interval({9, 8, 7, 6, 5, 4, 3, 2, 1});
  ASSERT_TRUE(nine.has_interval);
  EXPECT_EQ(nine.k, 2);
  EXPECT_DOUBLE_EQ(nine.coverage, 1.0 - 2.0 * 10 / 512);
  EXPECT_DOUBLE_EQ(nine.median, 5);
  EXPECT_DOUBLE_EQ(nine.lo, 2);
  EXPECT_DOUBLE_EQ(nine.hi, 8);
  // n = 20: P(B <= 5) = 21700/2^20 = 0.0207, P(B <= 6) = 0.0577: k = 6, [x(6), x(15)].
  std::vector<double> twenty;
  for (int i = 1; i <= 20; ++i) twenty.push_back(i);
  auto t = median_interval(twenty);
  EXPECT_EQ(t.k, 6);
  EXPECT_DOUBLE_EQ(t.lo, 6);
  EXPECT_DOUBLE_EQ(t.hi, 15);
  EXPECT_NEAR(t.coverage, 1.0 - 2.0 * 21700 / 1048576, 1e-12);
  auto five = median_interval({1, 2, 3, 4, 5});
  EXPECT_FALSE(five.has_interval);
  EXPECT_DOUBLE_EQ(five.median, 3);
  EXPECT_TRUE(std::isnan(median_interval({}).median));
}

TEST(MedianInterval, DecidedPassWhenTheLowerEndClearsTheBar) {
  auto m = median_interval({0.97, 1.02, 0.91, 1.05, 0.99, 0.93, 1.01});
  EXPECT_DOUBLE_EQ(m.lo, 0.91);
  EXPECT_EQ(judge_at_least(m, 0.8), BarVerdict::kPass);
}

TEST(MedianInterval, DecidedFailWhenTheUpperEndIsBelowTheBar) {
  auto m = median_interval({0.52, 0.61, 0.55, 0.49, 0.58, 0.63, 0.57, 0.6});
  EXPECT_DOUBLE_EQ(m.hi, 0.63);
  EXPECT_EQ(judge_at_least(m, 0.8), BarVerdict::kFail);
}

TEST(MedianInterval, UndecidedWhenTheIntervalStraddlesTheBarOrThereAreTooFewRounds) {
  // The median (0.82) clears the bar but one round at 0.7 keeps the interval across it.
  EXPECT_EQ(judge_at_least(median_interval({0.7, 0.82, 0.85, 0.81, 0.9, 0.83}), 0.8), BarVerdict::kUndecided);
  // Five rounds, all far above the bar: no 95% interval yet.
  EXPECT_EQ(judge_at_least(median_interval({2, 2, 2, 2, 2}), 0.8), BarVerdict::kUndecided);
}

}  // namespace
}  // namespace tc::stats
