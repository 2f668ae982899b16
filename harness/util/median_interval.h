// The median of a sample with a distribution-free confidence interval (order statistics), and a
// verdict against a bar: plain math, no LibTorch, so both the harness core and the checks use it.
//
// For n independent draws of a continuous quantity, the number of draws below the true median is
// Binomial(n, 1/2), so [x(k), x(n+1-k)] (1-based order statistics) covers the median with
// probability 1 - 2 P(B <= k-1), whatever the distribution. The interval uses the largest k whose
// coverage is at least the level asked; below 6 draws no k reaches 95% (n = 5, k = 1: 93.75%).
#pragma once

#include <vector>

namespace tc::stats {

struct MedianInterval {
  int n = 0;
  double median = 0.0;   // NaN for an empty sample
  bool has_interval = false;  // false: too few draws for the level
  double lo = 0.0, hi = 0.0;  // x(k), x(n+1-k); only when has_interval
  int k = 0;                  // the order statistic's rank (1-based)
  double coverage = 0.0;      // 1 - 2 P(B <= k-1), B ~ Binomial(n, 1/2)
};

MedianInterval median_interval(std::vector<double> sample, double level = 0.95);

// Against a bar that the quantity must reach (e.g. a throughput ratio >= 0.8): decided pass when
// the interval's lower end clears the bar, decided fail when its upper end is below it, otherwise
// undecided (also without an interval).
enum class BarVerdict { kPass, kFail, kUndecided };
BarVerdict judge_at_least(const MedianInterval& m, double bar);

const char* to_string(BarVerdict v);

}  // namespace tc::stats
