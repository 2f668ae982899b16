// `torchconform ab BASE NEW [-- bench flags]`: paired A/B benchmarking of two builds (the statistics
// in harness/ab/ab.h, the launching in harness/ab/ab_launch.h). Exit 0 no regression, 1 a regression
// (strict: or an inconclusive benchmark), 2 bad input, a program that is not torchconform, a
// failing child run.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/ab/ab.h"
#include "harness/ab/ab_report.h"
#include "harness/ab/ab_launch.h"
#include "harness/cli/common.h"
#include "harness/compare.h"
#include "harness/instructions.h"
#include "harness/settings.h"
#include "harness/util/text_format.h"

namespace tc::cli {
namespace {

struct AbArgs {
  std::string base, next, json, html;
  std::string time = "real";
  std::string pairing = "repetition";
  int rounds = 0;
  bool rounds_given = false;  // otherwise the pairing's default
  double time_budget_s = 0.0;
  uint64_t seed = 0;
  bool seed_given = false;
  std::string threshold = "5%";
  bool threshold_given = false;  // otherwise 5%, or with --time instructions 0.5%
  std::vector<std::string> metric_thresholds, base_env, next_env, bench_flags;
  bool strict = false;
  long long iterations = 2;  // --time instructions: per counted repetition
};

// One line per round of `--pairing run` on stderr: the first three benchmarks' values and ratio.
void print_round(const AbRound& round, int planned) {
  std::ostringstream line;
  line << "torchconform ab: round " << round.info.index + 1 << "/" << planned << " ("
       << (round.info.base_first ? "BASE, NEW" : "NEW, BASE") << "; load " << round.info.load1 << "):";
  const AbResult one = ab_compare({round}, AbOptions{});
  int shown = 0;
  for (const AbBench& b : one.benchmarks) {
    if (b.ratios.empty()) continue;
    if (shown++ == 3) {
      line << " ...";
      break;
    }
    line << (shown > 1 ? ";" : "") << ' ' << b.name << ' ' << fmt::num(b.base[0]) << " -> " << fmt::num(b.next[0]) << ' '
         << b.unit << " (x" << fmt::ratio(b.ratios[0]) << ')';
  }
  std::cerr << line.str() << '\n';
}

AbRunSpec spec_of(const AbArgs& a, int rounds) {
  for (const std::string& f : a.bench_flags) {
    if (f == "--json" || f.rfind("--json=", 0) == 0) {
      throw UsageError("--json after -- would move the children's reports: ab writes its own (give ab --json PATH "
                       "for the result)");
    }
  }
  AbRunSpec spec;
  spec.base = {"BASE", a.base, resolve_torchconform_binary(a.base), {}};
  spec.next = {"NEW", a.next, resolve_torchconform_binary(a.next), {}};
  for (const std::string& e : a.base_env) spec.base.env.push_back(parse_env_assignment(e));
  for (const std::string& e : a.next_env) spec.next.env.push_back(parse_env_assignment(e));
  spec.pairing = a.pairing == "repetition" ? AbPairing::kRepetition : AbPairing::kRun;
  spec.rounds = rounds;
  spec.time_budget_s = a.time_budget_s;
  spec.seed = a.seed_given ? a.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  spec.bench_flags = a.bench_flags;
  spec.child_timeout = std::chrono::seconds(env_positive_int("TORCHCONFORM_AB_TIMEOUT_S", 600));
  return spec;
}

int cmd_ab(const AbArgs& a, int argc, char** argv) {
  AbOptions options;
  const bool counted = a.time == "instructions";
  // Counted instructions of identical builds differ by about 0.1% (docs/benchmarks-and-gating.md):
  // 0.5% keeps five times that margin and still catches a 1% change.
  options.with_threshold(counted && !a.threshold_given ? instructions::kDefaultThreshold : parse_percent(a.threshold)).with_strict(a.strict).with_cpu_time(a.time == "cpu");
  options.with_instructions(counted);
  for (const std::string& m : a.metric_thresholds) {
    auto [name, t] = parse_metric_threshold(m);
    options.with_metric_threshold(name, t);
  }
  const bool by_repetition = a.pairing == "repetition";
  if (counted && !by_repetition) throw UsageError("--time instructions pairs repetitions (leave --pairing at repetition)");
  if (a.iterations < 1) throw UsageError("--iterations must be at least 1");
  // Counted: 6 rounds, the fewest with a 95% interval of the median (counts hardly vary; each
  // counted repetition costs about a second of valgrind per iteration of a 2 ms step).
  const int rounds = a.rounds_given ? a.rounds : counted ? 6 : (by_repetition ? 30 : 10);
  if (rounds < 1) throw UsageError("--rounds must be at least 1");
  if (a.time_budget_s < 0) throw UsageError("--time-budget must not be negative");
  const AbRunSpec spec = spec_of(a, rounds);

  AbRunInfo info;
  info.tool = tool_json();
  info.started_at = utc_now();
  for (int i = 0; i < argc; ++i) info.argv.push_back(argv[i]);
  info.base_arg = a.base;
  info.next_arg = a.next;
  info.base_binary = spec.base.binary;
  info.next_binary = spec.next.binary;
  info.base_env = spec.base.env;
  info.next_env = spec.next.env;
  info.pairing = a.pairing;
  info.instructions = counted;
  info.bench_flags = by_repetition ? a.bench_flags : ab_bench_flags(a.bench_flags);
  info.seed = spec.seed;
  info.planned_rounds = rounds;

  check_is_torchconform(spec.base, std::chrono::seconds(120));
  check_is_torchconform(spec.next, std::chrono::seconds(120));
  std::cerr << "torchconform ab: " << rounds << " round(s)" << (by_repetition ? " of one repetition of each build" : "");
  if (a.time_budget_s > 0) std::cerr << " or " << a.time_budget_s << " s";
  std::cerr << ", order seed " << spec.seed << " (--seed " << spec.seed << " repeats the orders)\n";
  auto progress = [](const std::string& line) { std::cerr << "torchconform ab: " << line << '\n'; };
  const AbRunLog log = counted         ? run_ab_instructions(spec, a.iterations, progress)
                       : by_repetition ? run_ab_interleaved(spec, progress)
                                       : run_ab_rounds(spec, print_round);
  info.stopped_by_budget = log.stopped_by_budget;
  info.iterations = log.iterations;
  if (by_repetition) info.turn_flags = log.turn_flags;
  info.wall_s = log.wall_s;
  info.ended_at = utc_now();
  info.environment = diff_environment(log.base_environment, log.next_environment);
  const AbResult result = ab_compare(log.rounds, options);
  std::cout << render_ab_text(info, result);
  if (!a.json.empty()) write_output(a.json, ab_to_json(info, result).dump(2) + "\n");
  if (!a.html.empty()) write_output(a.html, render_ab_html(info, result));
  return exit_code_for(result);
}

}  // namespace

Command add_ab(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<AbArgs>();
  auto* ab = app.add_subcommand(
      "ab",
      "Paired A/B benchmarking of two builds: BASE and NEW run side by side and take turns, one repetition "
      "of a benchmark each, in an order drawn per round (--pairing run: rounds of a short `bench` of each); "
      "per benchmark the median of the per-round ratios NEW/BASE with its 95% interval against --threshold. "
      "Exit 0 no regression, 1 a regression (--strict: or an inconclusive benchmark), 2 bad input, a program "
      "that is not torchconform, a failing child run");
  ab->add_option("BASE", a->base, "The baseline: a torchconform binary, or a build directory holding one")->required();
  ab->add_option("NEW", a->next, "The new build: a torchconform binary, or a build directory holding one")->required();
  ab->add_option("BENCH_FLAGS", a->bench_flags,
                 "After --: Google Benchmark flags for the builds' bench (e.g. --benchmark_filter=reference/; "
                 "--benchmark_min_time=S sets a repetition's length, default 0.1 s; with --pairing run "
                 "default --benchmark_repetitions=3 --benchmark_min_time=0.1 per round)");
  ab->add_option("--pairing", a->pairing,
                 "repetition: both builds run at once and alternate repetitions (a round is one repetition of "
                 "each, a fraction of a second apart); run: a round is one `bench` process of each, seconds apart")
      ->check(CLI::IsMember({"repetition", "run"}))
      ->capture_default_str();
  auto* rounds = ab->add_option("--rounds", a->rounds,
                                "Rounds: pairs of repetitions per benchmark (default 30), or with --pairing run pairs "
                                "of bench runs (default 10)");
  ab->add_option("--time-budget", a->time_budget_s, "Seconds: no new round starts after this (0: no budget; --rounds stays the most)")
      ->capture_default_str();
  auto* seed = ab->add_option("--seed", a->seed, "Seed of the rounds' order (default: random, printed)");
  auto* threshold = ab->add_option("--threshold", a->threshold,
                                   "Smallest change of the median ratio that counts (its whole interval beyond it); "
                                   "default 5%, with --time instructions 0.5%");
  // Repeatable options take one value per occurrence (allow_extra_args(false)): otherwise the last
  // one also swallows the bench flags after --.
  ab->add_option("--metric-threshold", a->metric_thresholds, "NAME=PCT: another threshold for one benchmark (repeatable)")
      ->allow_extra_args(false);
  ab->add_flag("--strict", a->strict, "An inconclusive benchmark fails the gate (exit 1)");
  ab->add_option("--time", a->time,
                 "real | cpu | instructions: a round's value from real (wall-clock) time, or from the CPU time of the "
                 "benchmark's thread (steadier on a machine shared with other jobs; blind to waiting, so only for "
                 "benchmarks whose work runs on the thread that times it, such as reference/train_step with its one "
                 "LibTorch thread), or from the instructions the benchmark's thread executes per iteration, counted "
                 "under valgrind (not moved by other jobs; blind to memory, threading and waiting; both builds are "
                 "counted at once)")
      ->check(CLI::IsMember({"real", "cpu", "instructions"}))
      ->capture_default_str();
  ab->add_option("--iterations", a->iterations,
                 "--time instructions: iterations per counted repetition (default 2; a round is one counted "
                 "repetition of each build, default 6 rounds)");
  ab->add_option("--base-env", a->base_env, "VAR=VALUE for BASE's runs only (repeatable)")->allow_extra_args(false);
  ab->add_option("--new-env", a->next_env,
                 "VAR=VALUE for NEW's runs only (repeatable; test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N)")
      ->allow_extra_args(false);
  ab->add_option("--json", a->json, "Also write the result as JSON (schema torchconform.ab/1)");
  ab->add_option("--html", a->html, "Also write the result as HTML");
  return {ab, [a, rounds, seed, threshold, argc, argv] {
            a->seed_given = seed->count() > 0;
            a->threshold_given = threshold->count() > 0;
            a->rounds_given = rounds->count() > 0;
            return cmd_ab(*a, argc, argv);
          }};
}

}  // namespace tc::cli
