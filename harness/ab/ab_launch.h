// `torchconform ab`: launching the two builds (part of the command line, tc_cli), in one of two
// pairings:
//  - run: each round runs `<binary> bench --json <scratch file> <bench flags>` of BASE and of NEW,
//    one after the other in the round's order, through child::run (its own process group, a
//    deadline, output to a log); the reports they write become the round's records.
//  - repetition (the default): first a calibration `bench` of each side (one repetition per
//    benchmark: which benchmarks each has, and BASE's iteration count); then, per benchmark both
//    have, both builds are started side by side on it (`bench --iterations N --ab-turns DIR`,
//    harness/ab/turns.h) and take turns, one repetition at a time, in the order drawn per round:
//    round j is the pair of j-th repetitions, measured within a fraction of a second of each
//    other, so that noise slower than a repetition cancels in the pair's ratio.
// Either way the rounds go to ab_compare() (harness/ab/ab.h).
//
// Bad input is a std::runtime_error with a plain sentence (the CLI exits 2): a path that is neither
// an executable nor a directory holding `torchconform`, a program that does not answer
// `list --json` with torchconform's catalogue, a child run that fails or writes no report (its
// output's tail in the message).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/ab/ab.h"

namespace tc {

struct AbSide {
  std::string label;                                     // "BASE" or "NEW"
  std::string arg;                                       // as given on the command line
  std::string binary;                                    // resolved, absolute
  std::vector<std::pair<std::string, std::string>> env;  // added to the inherited environment
};

enum class AbPairing { kRun, kRepetition };

struct AbRunSpec {
  AbSide base, next;
  AbPairing pairing = AbPairing::kRepetition;
  int rounds = 10;
  double time_budget_s = 0.0;  // > 0: no new round starts after this many seconds
  uint64_t seed = 0;
  std::vector<std::string> bench_flags;  // to every child's `bench`, after the defaults
  std::chrono::seconds child_timeout{600};
};

struct AbRunLog {
  std::vector<AbRound> rounds;          // for ab_compare; each with its order, load and wall times
  nlohmann::json base_environment, next_environment;  // from each side's first report
  bool stopped_by_budget = false;
  double wall_s = 0.0;
  // Repetition pairing: what each side's bench got in its turns (besides the filter), and the
  // iterations of one repetition per benchmark (Google Benchmark run name), from BASE's calibration.
  std::vector<std::string> turn_flags;
  std::vector<std::pair<std::string, long long>> iterations;
};

// The defaults each child's bench gets unless the flags given set them: 3 repetitions of at least
// 0.1 s each (a round's value is their median).
std::vector<std::string> ab_bench_flags(const std::vector<std::string>& given);

// BASE or NEW as given: an executable file, or a directory holding an executable `torchconform`.
// Returns its absolute path; throws std::runtime_error naming the argument otherwise.
std::string resolve_torchconform_binary(const std::string& arg);

// Runs `<binary> list --json` and checks that it prints torchconform's catalogue; throws
// std::runtime_error (with the program's output tail) otherwise.
void check_is_torchconform(const AbSide& side, std::chrono::seconds timeout);

// "VAR=VAL" -> {VAR, VAL}; throws std::invalid_argument.
std::pair<std::string, std::string> parse_env_assignment(const std::string& text);

// The machine's 1-minute load average (/proc/loadavg), -1 when unknown.
double load_average_1min();

// Runs the rounds, pairing runs. on_round is called after each (for progress on stderr).
AbRunLog run_ab_rounds(const AbRunSpec& spec,
                       const std::function<void(const AbRound&, int planned)>& on_round);

// Runs the rounds, pairing repetitions. `progress` gets a line to print now and then.
AbRunLog run_ab_interleaved(const AbRunSpec& spec, const std::function<void(const std::string&)>& progress);

// Runs the rounds counting instructions (`ab --time instructions`): each build's `bench --measure
// instructions --iterations N --benchmark_repetitions=ROUNDS` of the benchmarks the flags select,
// under valgrind (harness/instructions.h), both builds at once (counts do not depend on the load,
// so no turns; on two cores the pair takes the time of one); round j is the pair of j-th counted
// repetitions. Throws std::runtime_error when valgrind is missing or a side fails.
AbRunLog run_ab_instructions(const AbRunSpec& spec, long long iterations,
                             const std::function<void(const std::string&)>& progress);

// A Google Benchmark filter that matches exactly this run name.
std::string exact_filter(const std::string& run_name);

}  // namespace tc
