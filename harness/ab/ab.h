// Paired A/B benchmarking (`torchconform ab BASE NEW`): the statistics and the verdict, as pure
// functions over the records of the rounds (no I/O, no processes; the CLI's ab/ab_launch.cpp
// launches the two builds, ab_text.cpp / ab_html.cpp / ab_json.cpp format the result).
//
// Why paired: `compare` tests the samples of two runs made at different times, so a shift of the
// whole machine between the runs (another job starting) reads as a change of the code. `ab` runs
// BASE and NEW in rounds, each round one measurement of each in a random order (one repetition
// of each, the two builds taking turns side by side; or, pairing runs, a short benchmark process
// of each: harness/ab/ab_launch.h), and judges the per-round ratio NEW/BASE: a shift that lasts longer
// than a round hits both sides of that round alike and cancels in the ratio; a random order keeps
// a drift inside a round from favouring one side.
//
// Rules (also in docs/benchmarks-and-gating.md):
//  - A round's value of a benchmark on one side is the median of that side's repetitions in the
//    round (one when pairing repetitions), in real time (default) or in the CPU time of the
//    benchmark's thread (--time cpu). Benchmarks are paired by (name, device); a round that lacks one side of a benchmark
//    (or has a non-positive base value) gives no ratio for it.
//  - ratio = NEW / BASE per round. The verdict comes from the median of the ratios and its
//    distribution-free interval (order statistics, harness/util/median_interval.h, 95% by
//    default): the rounds are independent draws of the ratio; nothing else is assumed.
//  - Direction comes from the unit as in compare (direction_for_unit): time-like units, larger is
//    worse; units ending in "/s", smaller is worse. With t the threshold (global, or the
//    benchmark's own) and the worse change w = ratio - 1 (time) or 1 - ratio (throughput):
//      regression    the whole interval has w > t;
//      improvement   the whole interval has w < -t;
//      unchanged     the whole interval lies within [1 - t, 1 + t];
//      inconclusive  otherwise: the interval straddles 1 +- t, or too few rounds for an interval
//                    at the level (fewer than 6 at 95%). More rounds (or a quieter machine)
//                    narrow the interval.
//  - Exit: 0 no regression; 1 a regression (or, with strict, an inconclusive benchmark); 2 bad
//    input (the CLI's). An inconclusive benchmark passes by default, as compare passes a change
//    that is not significant, and is said in the output.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/compare.h"
#include "harness/contract/record.h"
#include "harness/util/median_interval.h"

namespace tc {

struct AbOptions {
  double threshold = 0.05;                          // fraction: 0.05 = 5%
  std::map<std::string, double> metric_thresholds;  // benchmark name -> fraction
  double level = 0.95;                              // coverage of the median's interval
  bool strict = false;                              // an inconclusive benchmark fails the gate
  // Which time a round's value is taken from: false, real (wall-clock) time, Google Benchmark's
  // real_time; true, the CPU time of the benchmark's thread (cpu_time). On a machine shared with
  // other jobs, real time includes the waits for a core, CPU time mostly does not; CPU time does
  // not see time spent waiting (I/O, a sleep, another thread's work), so it only fits benchmarks
  // whose work runs on the thread that times it (docs/benchmarks-and-gating.md).
  bool cpu_time = false;
  // A round's value from the instructions the benchmark's thread executed per iteration, counted
  // under valgrind (counters.instructions, harness/instructions.h); overrides cpu_time. Blind to
  // memory, threading and waiting, but not moved by other jobs on the machine.
  bool instructions = false;

  AbOptions& with_threshold(double t) { threshold = t; return *this; }
  AbOptions& with_metric_threshold(const std::string& name, double t) {
    metric_thresholds[name] = t;
    return *this;
  }
  AbOptions& with_strict(bool s) { strict = s; return *this; }
  AbOptions& with_cpu_time(bool c) { cpu_time = c; return *this; }
  AbOptions& with_instructions(bool i) { instructions = i; return *this; }
  // "real", "cpu" or "instructions": what a round's value is.
  const char* time_name() const { return instructions ? "instructions" : cpu_time ? "cpu" : "real"; }
};

// How one round ran: its index, which side went first, the machine's 1-minute load average when it
// started (< 0: unknown) and each side's wall time (0: not timed apart, e.g. both sides at once).
struct AbRoundInfo {
  int index = 0;
  bool base_first = true;
  double load1 = -1.0;
  double base_wall_s = 0.0, next_wall_s = 0.0;
};

// One round: how it ran, and the benchmark records each side wrote.
struct AbRound {
  AbRoundInfo info;
  std::vector<BenchmarkRecord> base, next;
};

enum class AbStatus {
  kRegression,
  kImprovement,
  kUnchanged,
  kInconclusive,
  kBaseOnly,     // never paired: present only in BASE's rounds
  kNewOnly,      // only in NEW's
  kUnitChanged,  // units differ: not comparable
};
const char* to_string(AbStatus s);

struct AbBench {
  std::string name, device, unit;
  Direction direction = Direction::kLowerIsBetter;
  double threshold = 0.0;          // the one that applied
  std::vector<int> rounds;         // 0-based index of the round of each pair below
  std::vector<double> base, next;  // per paired round: the side's median of its repetitions
  std::vector<double> ratios;      // next / base per paired round
  stats::MedianInterval ratio;     // median of the ratios and its interval
  AbStatus status = AbStatus::kInconclusive;
  std::string note;                // why inconclusive / not compared, for a reader
  // Counters beside the judged value, per paired round (--time instructions: the simulated cache
  // misses, harness/instructions.h): name -> BASE's and NEW's values. Shown, never judged.
  struct Beside {
    std::vector<double> base, next;
  };
  std::map<std::string, Beside> beside;
};

struct AbResult {
  AbOptions options;
  int rounds = 0;
  std::vector<AbRoundInfo> round_info;  // per round: order and load
  std::vector<AbBench> benchmarks;

  int count(AbStatus s) const;
};

// What the reporters print about the run besides the verdicts (filled by the CLI).
struct AbRunInfo {
  nlohmann::json tool;                   // name, version, git commit of this program
  std::string started_at, ended_at;      // UTC
  std::vector<std::string> argv;
  std::string base_arg, next_arg;        // BASE and NEW as given
  std::string base_binary, next_binary;  // resolved
  std::vector<std::pair<std::string, std::string>> base_env, next_env;
  std::string pairing = "repetition";    // "repetition" (turns within one bench each) or "run"
  bool instructions = false;             // repetition pairing, counted: both builds at once under valgrind
  std::vector<std::string> bench_flags;  // run: what each round's bench got; repetition: as given after --
  std::vector<std::string> turn_flags;   // repetition: what each side's bench got besides ab's own
  std::vector<std::pair<std::string, long long>> iterations;  // repetition: per benchmark run, of one repetition
  uint64_t seed = 0;
  int planned_rounds = 0;
  bool stopped_by_budget = false;
  double wall_s = 0.0;
  std::vector<EnvChange> environment;    // BASE's environment against NEW's (first round)
};

// The value of one side in one round: the median of its repetitions' real time (the record's
// median when it carries no samples), or, with cpu_time, of their CPU time (NaN when the record
// has none: a report written before CPU time was kept), or, with instructions, of its
// counters.instructions (NaN when it has none).
double round_value(const BenchmarkRecord& r, bool cpu_time = false, bool instructions = false);

// The verdict on paired ratios (exposed for tests): fills b.ratio, b.status and b.note from
// b.ratios, b.direction and b.threshold.
void judge_ratios(AbBench& b, double level);

// Pairs the rounds' records by (name, device) and judges each benchmark.
AbResult ab_compare(const std::vector<AbRound>& rounds, const AbOptions& options);

// 0: no regression (and, strict, nothing inconclusive); 1 otherwise.
int exit_code_for(const AbResult& r);

// The order of each round, true = BASE first: a fair coin per round from a generator seeded with
// `seed` (the same seed gives the same orders, so a run can be repeated).
std::vector<bool> ab_orders(uint64_t seed, int rounds);

}  // namespace tc
