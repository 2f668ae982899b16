// trend: each benchmark's median over a sequence of runs (oldest first), and the step changes that
// persist. Pure functions; trend_html.cpp formats.
//
// Rule: with W = window (default 3), a benchmark (name, device) has a persistent step change when
// it has at least W + 2 runs and each of its last W medians differs from the reference (the median
// of all earlier medians) by more than the threshold in the same direction. Worse (larger for
// time-like units, smaller for units ending in "/s") is a regression and fails the gate; better
// is reported as an improvement. A single outlier run never flags: all W must agree.
// Instruction counts (counters.instructions, `bench --measure instructions`): a benchmark counted
// in some runs gets a second series, unit "instructions", judged by the same rule with the
// instruction threshold (default 0.5%). When that series has enough history to be judged
// (W + 2 runs), it gates and the time series beside it is reported, not gating (unless
// gate_time_too).
#pragma once

#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/contract/record.h"

namespace tc {

struct TrendOptions {
  double threshold = 0.05;
  int window = 3;
  double instruction_threshold = 0.005;
  bool gate_time_too = false;
};

enum class TrendStatus { kStable, kRegression, kImprovement, kShortHistory };
const char* to_string(TrendStatus s);

struct TrendSeries {
  std::string name, device, unit;
  Direction direction = Direction::kLowerIsBetter;
  std::vector<double> medians;  // one per run, NaN where the run lacks this benchmark
  double reference = 0.0;       // median of the earlier runs' medians
  std::vector<double> recent_changes;  // the last W medians relative to the reference
  TrendStatus status = TrendStatus::kShortHistory;
  bool instructions = false;  // the series of instruction counts (per iteration)
  bool gating = true;         // false: a time series beside a judged instruction series
};

struct Trend {
  std::vector<std::string> labels;  // one per run
  std::vector<TrendSeries> series;
  TrendOptions options;
  int regressions() const;
};

Trend compute_trend(const std::vector<Report>& runs, const std::vector<std::string>& labels,
                    const TrendOptions& options);

// 0: no persistent regression; 1 otherwise.
int exit_code_for(const Trend& t);


}  // namespace tc
