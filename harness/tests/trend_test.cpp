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
  for (size_t i = 0; i < n; ++i) l.push_back(std::string("r").append(std::to_string(i)));
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

TEST(Trend, InstructionCountsGetTheirOwnSeriesWhichGatesInPlaceOfTheTime) {
  // Times wander by +-8% from night to night (a shared machine); counts step up 1% for good.
  const std::vector<double> times{10, 10.8, 9.3, 10.1, 10.9, 10.8, 10.85};
  const std::vector<double> counts{9.0e6, 9.001e6, 8.999e6, 9.0e6, 9.09e6, 9.091e6, 9.089e6};
  std::vector<Report> runs;
  for (size_t i = 0; i < times.size(); ++i) {
    Report r = with("step", "ms", {times[i]});
    r.benchmarks[0].counters["instructions"] = {{counts[i]}, counts[i]};
    runs.push_back(r);
  }
  Trend t = compute_trend(runs, labels(runs.size()), {});
  ASSERT_EQ(t.series.size(), 2u);
  EXPECT_FALSE(t.series[0].instructions);
  EXPECT_FALSE(t.series[0].gating);
  EXPECT_TRUE(t.series[1].instructions);
  EXPECT_EQ(t.series[1].unit, "instructions");
  EXPECT_EQ(t.series[1].status, TrendStatus::kRegression);
  EXPECT_EQ(exit_code_for(t), 1);
  // The same counts without the step: nothing gates, though the time's last runs are 8% up.
  for (size_t i = 4; i < runs.size(); ++i) runs[i].benchmarks[0].counters["instructions"] = {{9.0e6}, 9.0e6};
  t = compute_trend(runs, labels(runs.size()), {});
  EXPECT_EQ(t.series[0].status, TrendStatus::kRegression);
  EXPECT_EQ(t.series[1].status, TrendStatus::kStable);
  EXPECT_EQ(exit_code_for(t), 0);
  TrendOptions both;
  both.gate_time_too = true;
  EXPECT_EQ(exit_code_for(compute_trend(runs, labels(runs.size()), both)), 1);
}

}  // namespace
}  // namespace tc
