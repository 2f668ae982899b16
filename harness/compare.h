// compare / gate: pure functions over two parsed reports (no I/O). Reporters format the result
// (compare_text.cpp, compare_html.cpp); the CLI reads the files and exits by exit_code_for().
//
// Rules (also in README.md):
//  - Cells are matched by (check, recipe, device). A verdict got worse when it went from ok or
//    skipped to missed, false_alarm, fail (a subject, a user's recipe, failing) or error; a cell new in NEW with such a verdict also counts.
//  - Benchmarks are matched by (name, device). Direction comes from the unit: a unit that ends in
//    "/s" (items/s, samples/s, GB/s, TFLOP/s, ...) is a throughput, smaller is worse; any other
//    unit (s, ms, us, ns, bytes, ...) is time-like, larger is worse.
//  - change = (median_new - median_base) / median_base. A benchmark regressed only when the
//    two-sided Mann-Whitney U test (SciPy's method) finds the samples differ (p < alpha, both
//    sides >= 2 samples) AND the change in the worse direction exceeds the threshold (the global
//    one, or the benchmark's own from --metric-threshold NAME=PCT).
//  - A side with fewer than 9 samples gets a warning (the test has little power; with 2 + 2
//    samples the smallest exact p is 1/3, so nothing can be significant).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/record.h"
#include "harness/statistics.h"

namespace tc {

struct CompareOptions {
  double alpha = 0.05;
  double threshold = 0.05;                         // fraction: 0.05 = 5%
  std::map<std::string, double> metric_thresholds;  // benchmark name -> fraction
  int warn_below_samples = 9;

  CompareOptions& set_alpha(double a) { alpha = a; return *this; }
  CompareOptions& set_threshold(double t) { threshold = t; return *this; }
  CompareOptions& metric_threshold(const std::string& name, double t) {
    metric_thresholds[name] = t;
    return *this;
  }
};

// "5%", "5" and "0.5%" -> 0.05, 0.05, 0.005. Throws std::invalid_argument with a plain sentence.
double parse_percent(const std::string& text);
// "NAME=PCT" -> {NAME, fraction}. Throws std::invalid_argument.
std::pair<std::string, double> parse_metric_threshold(const std::string& text);

enum class Direction { kLowerIsBetter, kHigherIsBetter };
Direction direction_for_unit(const std::string& unit);

struct EnvChange {
  std::string key;   // dotted path, e.g. "gpu.cuda_driver", "cpu.flags"
  std::string base;  // rendered value ("n/a" when absent)
  std::string next;
};

struct CellChange {
  std::string check, recipe, device;
  std::optional<Verdict> base;  // nullopt: the cell is new
  std::optional<Verdict> next;  // nullopt: the cell is gone
  bool worse = false;
};

enum class BenchStatus {
  kRegression,   // significant and beyond the threshold in the worse direction
  kImprovement,  // significant and beyond the threshold in the better direction
  kUnchanged,    // not significant, or within the threshold
  kUntested,     // a side has fewer than 2 samples: no test, never a regression
  kAdded,
  kRemoved,
  kUnitChanged,  // units differ: not comparable, reported
};
const char* to_string(BenchStatus s);

struct BenchChange {
  std::string name, device, unit;
  std::vector<double> base_samples, next_samples;
  double base_median = 0.0, next_median = 0.0;
  double change = 0.0;     // relative change of the median, signed
  double threshold = 0.0;  // the threshold that applied
  Direction direction = Direction::kLowerIsBetter;
  std::optional<stats::MwuResult> test;
  bool significant = false;
  BenchStatus status = BenchStatus::kUnchanged;
  std::vector<std::string> warnings;
};

struct Comparison {
  std::string base_label, next_label;
  std::vector<EnvChange> environment;
  std::vector<CellChange> cells;  // only cells whose verdict changed, appeared or disappeared
  int cells_compared = 0;
  std::vector<BenchChange> benchmarks;  // every benchmark of either side
  CompareOptions options;

  int regressions() const;
  int worse_cells() const;
};

std::vector<EnvChange> diff_environment(const nlohmann::json& base, const nlohmann::json& next);
std::vector<CellChange> diff_cells(const std::vector<Cell>& base, const std::vector<Cell>& next,
                                   int* compared = nullptr);
BenchChange compare_benchmark(const BenchmarkRecord& base, const BenchmarkRecord& next,
                              const CompareOptions& options);
Comparison compare_reports(const Report& base, const Report& next, const CompareOptions& options,
                           std::string base_label = "BASE", std::string next_label = "NEW");

// 0: nothing regressed and no verdict got worse; 1 otherwise.
int exit_code_for(const Comparison& c);

}  // namespace tc
