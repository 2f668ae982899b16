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
//  - Instruction counts (counters.instructions, `bench --measure instructions`): a benchmark whose
//    records on both sides carry them gets a second row, unit "instructions" (per iteration, the
//    counted repetitions as samples), judged by the same rule with the instruction threshold
//    (--instruction-threshold, default 0.5%: identical builds' counts differ by about 0.1%). That
//    row gates; the time row beside it is reported but does not gate (a shared machine moves times
//    beyond any threshold; counts it does not), unless gate_time_too (--gate-time).
//  - A side with fewer than 9 samples gets a warning (the test has little power; with 2 + 2
//    samples the smallest exact p is 1/3, so nothing can be significant).
//  - Numerics: cells matched by (check, recipe, device) whose metrics hold a training fingerprint
//    (suites/support/fingerprint.h) on either side; see compare_fingerprints below for the classes
//    and the tolerance. --numerics decides whether they gate: off (default: reported, not gating),
//    tolerant (a diverged cell fails), strict (any compared cell not bitwise identical fails). A
//    broken variant's numerics are reported, never gating (some break determinism on purpose).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/contract/record.h"
#include "harness/util/statistics.h"

namespace tc {

// What numerics drift does to the gate (`compare --numerics`).
enum class NumericsGate {
  kOff,       // reported, not gating (the default)
  kTolerant,  // a diverged cell fails the gate
  kStrict,    // any cell compared that is not bitwise identical fails the gate
};
const char* to_string(NumericsGate g);
// "off" | "tolerant" | "strict"; throws std::invalid_argument with a plain sentence otherwise.
NumericsGate numerics_gate_from_string(const std::string& s);

// The default numerics tolerance: 2^-10 (about 0.098%) relative. Derived in compare_fingerprints.
inline constexpr double kNumericsTolerance = 0x1p-10;
// "Float rounding": two losses within this many units in the last place of the larger one (in the
// loss's precision: float32 when both values are float32 numbers, else float64) differ by rounding.
inline constexpr double kRoundingUlps = 4.0;

struct CompareOptions {
  double alpha = 0.05;
  double threshold = 0.05;                         // fraction: 0.05 = 5%
  std::map<std::string, double> metric_thresholds;  // benchmark name -> fraction
  int warn_below_samples = 9;
  NumericsGate numerics = NumericsGate::kOff;
  double numerics_tolerance = kNumericsTolerance;  // relative, as a fraction
  double instruction_threshold = 0.005;             // for the instruction-count rows
  bool gate_time_too = false;  // the time row of a benchmark with counts on both sides gates as well

  CompareOptions& with_threshold(double t) { threshold = t; return *this; }
  CompareOptions& with_metric_threshold(const std::string& name, double t) {
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
  bool instructions = false;  // the instruction-count row of the benchmark (unit "instructions")
  bool gating = true;         // false: reported, not gating (a time row beside instruction counts)
};

enum class NumericsStatus {
  kIdentical,     // every loss bit and the parameters' sha256 equal
  kDrifted,       // not identical; every loss and the parameters' L2 norm and max |x| within the tolerance
  kDiverged,      // a loss (or a parameter figure) beyond the tolerance
  kIncomparable,  // another number of steps or parameters, another fingerprint format, malformed
  kNotRecorded,   // the cell is in both reports, with a fingerprint in one only (e.g. an older report)
  kMissing,       // the cell is in one report only
};
const char* to_string(NumericsStatus s);

struct NumericsChange {
  std::string check, recipe, device;
  bool variant = false;  // a broken variant's cell (in either report): reported, never gating
  NumericsStatus status = NumericsStatus::kIdentical;
  std::string absent_from;  // kNotRecorded / kMissing: "base" or "new"
  size_t steps = 0;         // losses compared (the shorter curve)
  std::string params_sha256_base, params_sha256_next;
  bool losses_bitwise_equal = false, params_bitwise_equal = false;
  // The first step whose losses differ at all (bitwise), with both values.
  std::optional<size_t> first_difference;
  double first_base = 0.0, first_next = 0.0;
  // The first step whose losses differ by more than float rounding (kRoundingUlps), with both values.
  std::optional<size_t> first_beyond_rounding;
  double rounding_base = 0.0, rounding_next = 0.0;
  // The largest relative difference |a - b| / max(|a|, |b|) over the losses and the parameters'
  // L2 norm and max |x|, and where it was ("step 7", "params.l2_norm").
  double max_rel_diff = 0.0;
  std::string max_rel_where;
  // kDiverged: the first step beyond the tolerance (none when only the parameters are), both values.
  std::optional<size_t> first_beyond_tolerance;
  double diverged_base = 0.0, diverged_next = 0.0;
  std::string detail;  // kDiverged on the parameters, kIncomparable: why, in words
  double tolerance = 0.0;
};

// Compares two metrics.fingerprint objects (status kIdentical, kDrifted, kDiverged or
// kIncomparable; check/recipe/device left empty).
//
// The tolerance (relative, default 2^-10 ~ 0.098%). Two correct environments (LibTorch versions,
// thread counts, CPU instruction sets) may evaluate the same float32 reductions in other orders and
// with other kernels. Reordering a float32 sum of K terms changes it by at most gamma_K = K u / (1 - K u)
// relative to the sum of the magnitudes (Higham, Accuracy and Stability, Thm 3.1; u = 2^-24), so the
// tolerance 2^-10 = 2^14 u is the worst case of one reduction of K = 2^14 terms: four times the
// reference recipe's largest (its BatchNorm statistics and convolution weight gradient sum 16 images
// of 16 x 16 = 2^12 terms; its classifier's dot products have 1024) and far above the typical
// rounding difference, which grows like sqrt(K) u.
// Training then amplifies such a difference from step to step, by a factor that no a-priori bound
// captures; the class therefore states what was seen: drifted = the runs stayed within 2^14 u of
// each other at every step (their difference is of rounding's size), diverged = they did not, at the
// step named. Override with --numerics-tolerance; the largest relative difference is always
// reported, so a reader can judge against any other bound.
NumericsChange compare_fingerprints(const nlohmann::json& base, const nlohmann::json& next, double tolerance);

// Every cell with a fingerprint on either side, matched by (check, recipe, device).
std::vector<NumericsChange> diff_numerics(const std::vector<Cell>& base, const std::vector<Cell>& next,
                                          double tolerance);

// Whether a numerics result fails the gate under `gate`.
bool numerics_fails(const NumericsChange& n, NumericsGate gate);

struct Comparison {
  std::string base_label, next_label;
  std::vector<EnvChange> environment;
  std::vector<CellChange> cells;  // only cells whose verdict changed, appeared or disappeared
  int cells_compared = 0;
  std::vector<BenchChange> benchmarks;  // every benchmark of either side
  std::vector<NumericsChange> numerics;  // every cell with a fingerprint on either side
  CompareOptions options;

  int regressions() const;  // gating rows that regressed
  int worse_cells() const;
  int numerics_failures() const;  // cells whose numerics fail the gate under options.numerics
};

std::vector<EnvChange> diff_environment(const nlohmann::json& base, const nlohmann::json& next);
std::vector<CellChange> diff_cells(const std::vector<Cell>& base, const std::vector<Cell>& next,
                                   int* compared = nullptr);
BenchChange compare_benchmark(const BenchmarkRecord& base, const BenchmarkRecord& next,
                              const CompareOptions& options);
Comparison compare_reports(const Report& base, const Report& next, const CompareOptions& options,
                           std::string base_label = "BASE", std::string next_label = "NEW");

// 0: nothing regressed, no verdict got worse and no numerics failed the gate; 1 otherwise.
int exit_code_for(const Comparison& c);

}  // namespace tc
