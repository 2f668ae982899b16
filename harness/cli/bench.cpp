// `torchconform bench [--json PATH] [--iterations N] [--measure time|instructions] [google-benchmark
// flags]`: the registered benchmarks through Google Benchmark, folded into a report. Every flag this
// command does not declare passes to Google Benchmark untouched, which rejects the ones it does not
// know. Exit 0, 1 a benchmark failed, 2 bad usage or input.
//
// --measure instructions (harness/instructions.h): after the timed run, the same benchmarks run
// again in a child of this binary under valgrind (callgrind), a few iterations per repetition, and
// each record gets counters.instructions (per iteration, one sample per counted repetition) beside
// its real and CPU times; environment.valgrind says how they were counted. The child is this same
// command under valgrind: there it counts instead of starting another.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>

#include "harness/ab/turns.h"
#include "harness/bench.h"
#include "harness/child_process.h"
#include "harness/cli/common.h"
#include "harness/contract/scratch.h"
#include "harness/instructions.h"
#include "harness/report_json.h"
#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"

namespace tc::cli {
namespace {

using nlohmann::json;

struct BenchArgs {
  std::string json_path;  // empty: reports/latest-bench.json, written anew
  std::string iterations;
  std::string turns_dir;
  std::string measure = "time";
  std::string count_iterations = "2";
  std::string count_repetitions = "5";
};

long long parse_iterations(const std::string& v) {
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 1) throw UsageError("--iterations needs a whole number of at least 1, not '" + v + "'");
  return n;
}

// The hooks that make each repetition wait for its turn from `ab --pairing repetition`.
struct Turns {
  std::unique_ptr<TurnTaker> taker;
  size_t taken = 0;
  explicit Turns(const std::string& dir) {
    if (dir.empty()) return;
    taker = std::make_unique<TurnTaker>(dir);
    bench::set_invocation_hooks(
        [this](benchmark::State& s) {
          ++taken;
          switch (taker->wait()) {
            case TurnTaker::Turn::kGo: return true;
            case TurnTaker::Turn::kStop: s.SkipWithError("skipped: stopped by ab (its time budget is spent)"); return false;
            case TurnTaker::Turn::kGone: s.SkipWithError("ab stopped giving turns (it has ended)"); return false;
          }
          return false;
        },
        [this] { taker->done(); });
  }
  ~Turns() { bench::set_invocation_hooks(nullptr, nullptr); }
};

std::string self_exe() {
  std::string exe = posix_fs::executable_path();
  if (exe.empty()) throw std::runtime_error("cannot find this program (/proc/self/exe) to count its instructions");
  return exe;
}

// The counting pass of `bench --measure instructions`: this binary's bench under valgrind on the
// benchmarks the flags select (`passed`, without those that set repetitions, times or outputs),
// `iterations` per repetition; its records carry counters.instructions. Merged into `records` by
// (name, device); environment.valgrind into the report.
void count_instructions(std::vector<BenchmarkRecord>& records, Report& report, const std::vector<std::string>& passed,
                        long long iterations, int repetitions) {
  const std::string valgrind = instructions::find_valgrind();
  if (valgrind.empty()) {
    throw UsageError("--measure instructions needs valgrind (Debian's valgrind package; or TORCHCONFORM_VALGRIND=PATH)");
  }
  Scratch scratch("torchconform-instructions-");
  const std::string dumps = scratch.file("dumps");
  posix_fs::make_dirs(dumps);
  std::vector<std::string> argv{self_exe(), "bench", "--measure", "instructions", "--json", scratch.file("counted.json"),
                                "--iterations", std::to_string(iterations),
                                "--benchmark_repetitions=" + std::to_string(repetitions)};
  for (const std::string& f : passed) {
    const bool ours = f.rfind("--benchmark_repetitions", 0) == 0 || f.rfind("--benchmark_min_time", 0) == 0 ||
                      f.rfind("--benchmark_out", 0) == 0;
    if (!ours) argv.push_back(f);
  }
  child::Spec spec;
  spec.argv = instructions::wrap_argv(valgrind, dumps, argv);
  spec.env = instructions::child_env(dumps);
  spec.log_path = scratch.file("counted.log");
  spec.timeout = std::chrono::seconds(3600);
  std::cerr << "torchconform: counting instructions under valgrind (" << repetitions << " repetition(s) of "
            << iterations << " iteration(s) per benchmark; about 50-100x slower than native)\n";
  const child::Result r = child::run(spec);
  if (r.timed_out || r.exit_code != 0) {
    throw std::runtime_error("the counting run under valgrind " +
                             std::string(r.timed_out ? "did not finish in 3600 s" : "failed (exit " + std::to_string(r.exit_code) + ")") +
                             "; its output ended with:\n" + child::tail_of(spec.log_path, 2000));
  }
  const Report counted = read_report_file(scratch.file("counted.json"));
  int merged = 0;
  for (BenchmarkRecord& rec : records) {
    for (const BenchmarkRecord& c : counted.benchmarks) {
      auto it = c.counters.find(instructions::kCounter);
      if (c.name != rec.name || c.device != rec.device || it == c.counters.end()) continue;
      rec.counters[instructions::kCounter] = it->second;
      for (const auto& m : instructions::kCacheMisses) {
        if (auto x = c.counters.find(m.counter); x != c.counters.end()) rec.counters[m.counter] = x->second;
      }
      ++merged;
    }
  }
  report.environment["valgrind"] = instructions::environment_block(valgrind, iterations, repetitions);
  std::cerr << "torchconform: counted the instructions of " << merged << " benchmark(s) in " << r.wall_s << " s\n";
}

// Says which benchmarks failed (a benchmark that cannot run here is said, not counted); returns
// how many failed.
int report_errors(const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  int errors = 0;
  for (const auto& r : runs) {
    if (r.error_occurred && r.error_message.rfind("skipped: ", 0) == 0) {
      std::cerr << "torchconform: benchmark " << r.benchmark_name() << " " << r.error_message << '\n';
    } else if (r.error_occurred) {
      ++errors;
      std::cerr << "torchconform: benchmark " << r.benchmark_name() << " failed: " << r.error_message << '\n';
    }
  }
  return errors;
}

int cmd_bench(const BenchArgs& a, std::vector<std::string> passed, int argc, char** argv, const std::string& help) {
  apply_thread_count();  // as for run: the benchmarks' intra-op threads (recorded in the environment)
  const bool merge = !a.json_path.empty();
  const std::string json_path = merge ? a.json_path : "reports/latest-bench.json";
  long long iterations = a.iterations.empty() ? 0 : parse_iterations(a.iterations);
  if (a.measure != "time" && a.measure != "instructions") {
    throw UsageError("--measure takes time or instructions, not '" + a.measure + "'");
  }
  // Inside valgrind, started by `--measure instructions` (count_instructions) or by `ab --time
  // instructions`: count, with a fixed number of iterations (one invocation = one repetition).
  const bool counting = a.measure == "instructions" && instructions::on_valgrind();
  if (counting && iterations == 0) iterations = 2;
  if (counting && !a.turns_dir.empty()) throw UsageError("--ab-turns and counted instructions do not go together");
  const long long count_iterations = parse_iterations(a.count_iterations);
  const long long count_repetitions = parse_iterations(a.count_repetitions);
  if (a.measure == "instructions" && !counting && !instructions::supported()) {
    throw UsageError("this torchconform was built without Valgrind's headers (valgrind/callgrind.h): it cannot count "
                     "instructions; install Debian's valgrind package and rebuild");
  }
  if (std::find(passed.begin(), passed.end(), "--help") != passed.end()) std::cout << help << "\nGoogle Benchmark flags:\n";
  std::vector<std::string> gargs{argv[0]};
  bool has_repetitions = false;
  for (const std::string& f : passed) {
    has_repetitions = has_repetitions || f.rfind("--benchmark_repetitions", 0) == 0;
    gargs.push_back(f);
  }
  if (!has_repetitions) gargs.push_back("--benchmark_repetitions=5");
  std::vector<char*> gargv;
  for (std::string& s : gargs) gargv.push_back(s.data());
  gargv.push_back(nullptr);
  int gargc = static_cast<int>(gargs.size());
  benchmark::Initialize(&gargc, gargv.data());
  if (benchmark::ReportUnrecognizedArguments(gargc, gargv.data())) return kExitUsage;

  const bool existing = merge && posix_fs::exists(json_path);
  // Before the benchmarks run: bad input fails before the long run, and the header records the
  // machine as the run found it (benchmarks may change global flags: the reference recipe turns
  // deterministic algorithms on).
  Report report = existing ? read_report_file(json_path) : report_header(argc, argv, 0, json::array({"cpu"}));
  if (iterations > 0) bench::set_fixed_iterations(iterations);
  Turns turns(a.turns_dir);
  std::unique_ptr<instructions::Counter> counter;
  if (counting) counter = std::make_unique<instructions::Counter>();
  bench::CollectingReporter reporter(std::make_unique<benchmark::ConsoleReporter>());
  const size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (ran == 0) throw UsageError("no benchmark matched (see `torchconform bench --benchmark_list_tests`)");
  if (turns.taker && turns.taken == 0) {
    // Registered with Google Benchmark directly (BENCHMARK(...)), not through tc::bench::add: it
    // ran without waiting for its turns.
    throw UsageError("--ab-turns: the benchmark did not take turns (registered without tc::bench::add); "
                     "compare it with `ab --pairing run`");
  }
  const int errors = report_errors(reporter.runs());
  counter.reset();  // instrumentation off: the rest is not measured
  std::vector<BenchmarkRecord> records = bench::records_from_runs(reporter.runs());
  if (records.empty()) return errors > 0 ? 1 : 0;  // --benchmark_list_tests and the like: nothing to write
  if (a.measure == "instructions" && !counting) {
    count_instructions(records, report, passed, count_iterations, static_cast<int>(count_repetitions));
  }
  if (!existing) report.run["ended_at"] = utc_now();
  bench::merge_benchmarks(report.benchmarks, records);
  write_file_atomically(json_path, report_to_json(report).dump(2) + "\n");
  std::cerr << "torchconform: wrote " << records.size() << " benchmark record(s) to " << json_path << '\n';
  return errors > 0 ? 1 : 0;
}

}  // namespace

Command add_bench(CLI::App& app, int argc, char** argv) {
  auto a = std::make_shared<BenchArgs>();
  auto* sub = app.add_subcommand(
      "bench",
      "Run the registered benchmarks through Google Benchmark (default --benchmark_repetitions=5) and write "
      "their per-repetition samples, median and cv into reports/latest-bench.json, or merge them into the "
      "report --json PATH (replacing benchmarks of the same name and device). Flags it does not declare pass "
      "to Google Benchmark (listed below with --help)");
  sub->allow_extras();
  sub->set_help_flag();  // --help passes through too: this help, then Google Benchmark's
  sub->add_option("--json", a->json_path, "Merge into this report instead of writing reports/latest-bench.json");
  sub->add_option("--iterations", a->iterations,
                  "Every benchmark runs exactly N iterations per repetition (no estimation)");
  sub->add_option("--measure", a->measure,
                  "time (default), or instructions: also count each benchmark's instructions per iteration "
                  "under valgrind (callgrind), recorded as counters.instructions beside the times, with the "
                  "misses of a simulated cache (counters.l1_misses, counters.ll_misses; shown, never gating)");
  sub->add_option("--instruction-iterations", a->count_iterations,
                  "--measure instructions: iterations per counted repetition (default 2)");
  sub->add_option("--instruction-repetitions", a->count_repetitions,
                  "--measure instructions: counted repetitions per benchmark (default 5)");
  sub->add_option("--ab-turns", a->turns_dir, "Each repetition waits for its turn from `ab --pairing repetition`")
      ->group("");  // internal: ab's own use
  sub->footer(
      "Test hooks: TORCHCONFORM_BENCH_SLOWDOWN_MS=N adds N ms of CPU work to every reference/train_step step;\n"
      "TORCHCONFORM_BENCH_EXTRA_WORK=N adds N thousand fixed loop rounds (a fixed number of instructions).\n"
      "Exit codes: 0 every benchmark ran, 1 a benchmark failed, 2 bad usage or input.");
  return {sub, [a, sub, argc, argv] { return cmd_bench(*a, sub->remaining(), argc, argv, sub->help()); }};
}

}  // namespace tc::cli
