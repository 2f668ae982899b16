#include <cmath>

#include <gtest/gtest.h>

#include "harness/trend.h"

namespace tc {
namespace {

Report with(const std::string& name, const std::string& unit, std::vector<double> samples) {
  Report r;
  r.benchmarks.push_back({name, "cpu", unit, samples, 0.0, 0.0});
  return r;
}

std::vector<Report> series(const std::string& unit, const std::vector<double>& medians) {
  std::vector<Report> out;
  for (double m : medians) out.push_back(with("step", unit, {m * 0.99, m, m * 1.01}));
  return out;
}

std::vector<std::string> labels(size_t n) {
  std::vector<std::string> l;
  for (size_t i = 0; i < n; ++i) l.push_back("r" + std::to_string(i));
  return l;
}

TEST(Trend, PersistentStepUpInTimeIsARegression) {
  auto runs = series("ms", {10, 10.2, 9.9, 10.1, 12, 12.1, 11.9});
  Trend t = compute_trend(runs, labels(runs.size()), {});
  ASSERT_EQ(t.series.size(), 1u);
  EXPECT_EQ(t.series[0].status, TrendStatus::kRegression);
  EXPECT_NEAR(t.series[0].reference, 10.05, 1e-9);
  EXPECT_EQ(exit_code_for(t), 1);
}

TEST(Trend, OneOutlierAmongTheLastRunsIsNotAStep) {
  auto runs = series("ms", {10, 10.2, 9.9, 10.1, 12, 10.0, 12.1});
  EXPECT_EQ(compute_trend(runs, labels(runs.size()), {}).series[0].status, TrendStatus::kStable);
}

TEST(Trend, ThroughputStepDownIsARegressionAndUpAnImprovement) {
  auto down = series("items/s", {100, 101, 99, 80, 79, 81});
  EXPECT_EQ(compute_trend(down, labels(down.size()), {}).series[0].status, TrendStatus::kRegression);
  auto up = series("items/s", {100, 101, 99, 120, 119, 121});
  Trend t = compute_trend(up, labels(up.size()), {});
  EXPECT_EQ(t.series[0].status, TrendStatus::kImprovement);
  EXPECT_EQ(exit_code_for(t), 0);
}

TEST(Trend, ShortHistoryIsNeverFlagged) {
  auto runs = series("ms", {10, 20, 20, 20});  // window 3 needs 5 runs
  EXPECT_EQ(compute_trend(runs, labels(runs.size()), {}).series[0].status, TrendStatus::kShortHistory);
}

TEST(Trend, RunsWithoutTheBenchmarkAreGaps) {
  auto runs = series("ms", {10, 10, 10, 10, 10});
  runs.insert(runs.begin() + 2, Report{});
  Trend t = compute_trend(runs, labels(runs.size()), {});
  EXPECT_TRUE(std::isnan(t.series[0].medians[2]));
  EXPECT_EQ(t.series[0].status, TrendStatus::kStable);
}

}  // namespace
}  // namespace tc
