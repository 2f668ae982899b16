#include "harness/cli.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include "harness/util/atomic_file.h"
#include "harness/util/posix_fs.h"
#include "harness/ab/ab.h"
#include "harness/ab/report.h"
#include "harness/ab/run.h"
#include "harness/ab/turns.h"
#include "harness/bench.h"
#include "harness/catalogue.h"
#include "harness/compare.h"
#include "harness/compare_html.h"
#include "harness/compare_text.h"
#include "harness/console.h"
#include "harness/devices.h"
#include "harness/environment.h"
#include "harness/gbench_json.h"
#include "harness/html_writer.h"
#include "harness/multi_process.h"
#include "harness/qualify/qualify.h"
#include "harness/contract/registry.h"
#include "harness/report_json.h"
#include "harness/runner.h"
#include "harness/scratch.h"
#include "harness/trend.h"
#include "harness/trend_html.h"
#include "harness/trend_text.h"
#include "harness/version.h"

namespace tc {
namespace {

using nlohmann::json;

constexpr int kExitUsage = 2;

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json tool_json() {
  return {{"name", "torchconform"},
          {"version", build::kVersion},
          {"git_commit", build::kGitCommit ? json(build::kGitCommit) : json(nullptr)}};
}

// Bad usage or bad input: the message, and exit 2 (cli_main's one catch).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What every report written by `run` and `bench` starts with: the tool, the run (started_at,
// argv, seed, devices) and the environment as the run found it.
Report report_header(int argc, char** argv, int64_t seed, const json& devices) {
  Report report;
  report.tool = tool_json();
  json argv_json = json::array();
  for (int i = 0; i < argc; ++i) argv_json.push_back(argv[i]);
  report.run = {{"started_at", utc_now()}, {"argv", argv_json}, {"seed", seed}, {"devices", devices}};
  report.environment = capture_environment();
  return report;
}

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const std::string& item : items) {
    std::stringstream ss(item);
    for (std::string part; std::getline(ss, part, ',');) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

// This very binary (multi-process cells launch it under torchrun).
std::string self_executable() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  return n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
}

int cmd_list(bool as_json) {
  const Registry& reg = Registry::global();
  const int gpus = cuda_available() ? cuda_device_count() : 0;
  if (as_json) {
    std::cout << catalogue_json(reg, gpus).dump(2) << '\n';
  } else {
    std::cout << render_catalogue_text(reg, gpus);
  }
  return 0;
}

struct RunArgs {
  std::string device = "auto";
  std::vector<std::string> checks, recipes;
  int64_t seed = 1234;
  bool quick = false;
  bool sweep = false;
  bool no_distributed = false;
  std::string work_dir;  // multi-process worker: shared by the ranks (default under reports/)
  std::string part;      // a fresh process of CheckContext::in_fresh_process: one part of one cell
  std::string json_path = "reports/latest.json";
  std::string html_path = "reports/latest.html";
  double parse_memory_mb = 0.0;  // 0: TORCHCONFORM_PARSE_MEMORY_MB as it is (default 4096)
  double parse_seconds = 0.0;    // 0: TORCHCONFORM_PARSE_SECONDS as it is (default 60)
};

// The plan of `run`: filters, devices, multi-process checks. Bad usage throws UsageError.
RunPlan plan_run(const Registry& reg, const RunArgs& a) {
  for (const std::string& p : reg.validate()) throw UsageError(p);
  RunPlan plan;
  plan.checks = split_list(a.checks);
  plan.recipes = split_list(a.recipes);
  plan.seed = a.seed;
  plan.quick = a.quick;
  plan.sweep = a.sweep;
  plan.cuda_present = cuda_available();
  plan.executable = self_executable();
  plan.worker = under_torchrun();
  plan.work_dir = a.work_dir;
  plan.part = a.part;
  if (!plan.part.empty() && (plan.checks.size() != 1 || plan.recipes.size() != 1)) {
    throw UsageError("--part runs a part of one cell: give one --check and one --recipe");
  }
  if (plan.work_dir.empty()) {
    const char* id = std::getenv("TORCHELASTIC_RUN_ID");
    plan.work_dir = std::string("reports/distributed/") + (id && *id ? id : "run");
  }
  // Multi-process checks: outside torchrun the runner launches torchrun for each of their cells (or
  // --no-distributed leaves them out); under torchrun only they run, each rank its share, and only
  // rank 0 judges and writes the report.
  if (plan.worker || a.no_distributed) {
    std::vector<std::string> wanted = plan.checks;
    if (wanted.empty()) {
      for (const CheckInfo& c : reg.checks()) wanted.push_back(c.name);
    }
    std::vector<std::string> kept;
    for (const std::string& c : wanted) {
      const CheckInfo* info = reg.find_check(c);
      if (info == nullptr || info->multi_process() == plan.worker) kept.push_back(c);  // unknown: plan_cells names it
    }
    if (kept.empty()) {
      throw UsageError(plan.worker ? "under torchrun only the multi-process checks run (e.g. --check distributed)"
                                   : "--no-distributed leaves no check to run");
    }
    plan.checks = kept;
  }
  try {
    plan.devices = resolve_devices(a.device);
    if (plan_cells(reg, plan).empty()) throw UsageError("nothing to run: no check or recipe is registered");
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return plan;
}

// Runs the plan's cells with a line of progress per cell on stderr (and the running cell on a
// terminal).
std::vector<Cell> run_with_progress(const Registry& reg, const RunPlan& plan) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  RunCallbacks cb;
  cb.on_start = [&](const PlannedCell& p, size_t i, size_t n) {
    if (tty) {
      std::cerr << "[" << i + 1 << "/" << n << "] running " << p.check->name << " / "
                << p.recipe->name << " / " << p.device.name << " ...\r" << std::flush;
    }
  };
  cb.on_done = [&](const Cell& c, size_t i, size_t n) {
    if (tty) std::cerr << "\33[2K";
    print_cell_line(std::cerr, c, i, n);
  };
  return run_cells(reg, plan, cb);
}

// Writes each path given ('' skips); a path that cannot be written throws (exit 2), and what was
// there before stays (atomic writes).
void write_report(const Report& report, const std::string& json_path, const std::string& html_path) {
  if (!json_path.empty()) {
    write_file_atomically(json_path, report_to_json(report).dump(2) + "\n");
    std::cerr << "torchconform: wrote " << json_path << '\n';
  }
  if (!html_path.empty()) {
    write_file_atomically(html_path, render_html(report));
    std::cerr << "torchconform: wrote " << html_path << '\n';
  }
}

// TORCHCONFORM_THREADS=N: LibTorch's intra-op threads for the whole run (the processes a check
// starts inherit the variable). OMP_NUM_THREADS alone is capped at the machine's cores by LibTorch;
// this is not, so a run can compare thread counts a machine does not have (compare --numerics).
void apply_thread_count() {
  const char* v = std::getenv("TORCHCONFORM_THREADS");
  if (v == nullptr || *v == '\0') return;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1 || n > 1024) {
    throw UsageError(std::string("TORCHCONFORM_THREADS='") + v + "' is not a thread count from 1 to 1024");
  }
  at::set_num_threads(static_cast<int>(n));
}

// --parse-memory-mb / --parse-seconds: the limits under which a checkpoint file is first parsed in
// a child process (reference/bounded_parse.h reads them from the environment, as do the processes
// a check starts).
void apply_parse_limits(const RunArgs& a) {
  if (a.parse_memory_mb < 0 || a.parse_seconds < 0) throw UsageError("--parse-memory-mb and --parse-seconds must be positive");
  if (a.parse_memory_mb > 0) setenv("TORCHCONFORM_PARSE_MEMORY_MB", std::to_string(a.parse_memory_mb).c_str(), 1);
  if (a.parse_seconds > 0) setenv("TORCHCONFORM_PARSE_SECONDS", std::to_string(a.parse_seconds).c_str(), 1);
}

int cmd_run(const RunArgs& a, int argc, char** argv) {
  apply_parse_limits(a);
  apply_thread_count();  // before the environment is captured: the report records the count used
  const Registry& reg = Registry::global();
  const RunPlan plan = plan_run(reg, a);
  json devices = json::array();
  for (const DeviceSlot& d : plan.devices) devices.push_back(d.name);
  Report report = report_header(argc, argv, a.seed, devices);
  report.run["quick"] = a.quick;
  report.run["sweep"] = a.sweep;

  if (plan.worker && torchrun_rank() != 0) {  // rank 0 reports; the others only say what broke
    report.cells = run_cells(reg, plan);
    for (const Cell& c : report.cells) {
      if (c.verdict == Verdict::kError) print_cell_line(std::cerr, c, 0, 1);
    }
    // Their cells are rank 0's to judge (they may read as skipped here): 0 unless one broke.
    return exit_code_for(report.cells) == 1 ? 1 : 0;
  }
  std::cerr << "torchconform: " << plan_cells(reg, plan).size() << " cells (" << plan.devices.size()
            << " device(s)), seed " << a.seed << (a.quick ? ", quick" : "") << '\n';
  report.cells = run_with_progress(reg, plan);
  report.run["ended_at"] = utc_now();
  print_summary(std::cout, report.cells);
  write_report(report, a.json_path, a.html_path);
  return exit_code_for(report.cells);
}

int cmd_report(const std::string& in, const std::string& html) {
  Report r = read_report_file(in);
  write_file_atomically(html, render_html(r));
  std::cerr << "torchconform: wrote " << html << '\n';
  return 0;
}

struct CompareArgs {
  std::string base, next, html;
  std::string threshold = "5%";
  std::vector<std::string> metric_thresholds;
  std::string numerics = "off";
  std::string numerics_tolerance;  // empty: kNumericsTolerance
};

// Exit 0: nothing regressed; 1: a regression or a verdict that got worse; 2: bad input.
int cmd_compare(const CompareArgs& a) {
  CompareOptions options;
  options.set_threshold(parse_percent(a.threshold));
  for (const std::string& m : a.metric_thresholds) {
    auto [name, t] = parse_metric_threshold(m);
    options.metric_threshold(name, t);
  }
  options.numerics = numerics_gate_from_string(a.numerics);
  if (!a.numerics_tolerance.empty()) options.numerics_tolerance = parse_percent(a.numerics_tolerance);
  Report base = read_comparable_file(a.base);
  Report next = read_comparable_file(a.next);
  const Comparison c = compare_reports(base, next, options, a.base, a.next);
  std::cout << render_compare_text(c);
  if (!a.html.empty()) {
    write_file_atomically(a.html, render_compare_html(c));
    std::cerr << "torchconform: wrote " << a.html << '\n';
  }
  return exit_code_for(c);
}

// `bench [--json PATH] [google-benchmark flags]`: parsed by hand so that every Google Benchmark
// flag passes through untouched; Google Benchmark rejects the ones it does not know.
int cmd_bench(int argc, char** argv) {
  apply_thread_count();  // as for run: the benchmarks' intra-op threads (recorded in the environment)
  std::string json_path = "reports/latest-bench.json", turns_dir;
  long long iterations = 0;
  bool merge = false, has_repetitions = false;
  std::vector<std::string> gargs{argv[0]};
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" || a.rfind("--json=", 0) == 0) {
      if (a == "--json" && i + 1 >= argc) throw UsageError("--json needs a path");
      json_path = a == "--json" ? argv[++i] : a.substr(7);
      merge = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      std::cout << "torchconform bench [--json PATH] [google-benchmark flags]\n"
                   "  Runs the registered benchmarks through Google Benchmark (default "
                   "--benchmark_repetitions=5) and writes\n  their per-repetition samples, median and cv "
                   "into reports/latest-bench.json, or merges them into the\n  report --json PATH "
                   "(replacing benchmarks of the same name and device).\n"
                   "  --iterations N   every benchmark runs exactly N iterations per repetition (no "
                   "estimation)\n"
                   "  --ab-turns DIR   each repetition waits for its turn from `ab --pairing repetition` "
                   "(ab's own use)\n"
                   "  Test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N adds N ms of CPU work to every "
                   "reference/train_step step.\n\nGoogle Benchmark flags:\n";
      gargs.push_back("--help");
      continue;
    }
    if (a == "--iterations" || a == "--ab-turns") {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--ab-turns") {
        turns_dir = v;
        continue;
      }
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1) throw UsageError("--iterations needs a whole number of at least 1, not '" + v + "'");
      iterations = n;
      continue;
    }
    if (a.rfind("--benchmark_repetitions", 0) == 0) has_repetitions = true;
    gargs.push_back(a);
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
  std::unique_ptr<TurnTaker> turns;
  size_t turns_taken = 0;
  struct UnhookOnReturn {  // the hooks refer to `turns`: gone with it
    ~UnhookOnReturn() { bench::set_invocation_hooks(nullptr, nullptr); }
  } unhook;
  if (!turns_dir.empty()) {
    turns = std::make_unique<TurnTaker>(turns_dir);
    bench::set_invocation_hooks(
        [&turns, &turns_taken](benchmark::State& s) {
          ++turns_taken;
          switch (turns->wait()) {
            case TurnTaker::Turn::kGo: return true;
            case TurnTaker::Turn::kStop: s.SkipWithError("skipped: stopped by ab (its time budget is spent)"); return false;
            case TurnTaker::Turn::kGone: s.SkipWithError("ab stopped giving turns (it has ended)"); return false;
          }
          return false;
        },
        [&turns] { turns->done(); });
  }
  bench::CollectingReporter reporter(std::make_unique<benchmark::ConsoleReporter>());
  const size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (ran == 0) throw UsageError("no benchmark matched (see `torchconform bench --benchmark_list_tests`)");
  if (turns && turns_taken == 0) {
    // Registered with Google Benchmark directly (BENCHMARK(...)), not through tc::bench::add: it
    // ran without waiting for its turns.
    throw UsageError("--ab-turns: the benchmark did not take turns (registered without tc::bench::add); "
                     "compare it with `ab --pairing run`");
  }
  int errors = 0;
  for (const auto& r : reporter.runs()) {
    if (r.error_occurred && r.error_message.rfind("skipped: ", 0) == 0) {
      // A benchmark that cannot run here (no CUDA device): said, not a failure.
      std::cerr << "torchconform: benchmark " << r.benchmark_name() << " " << r.error_message << '\n';
    } else if (r.error_occurred) {
      ++errors;
      std::cerr << "torchconform: benchmark " << r.benchmark_name() << " failed: " << r.error_message << '\n';
    }
  }
  const std::vector<BenchmarkRecord> records = bench::records_from_runs(reporter.runs());
  if (records.empty()) {
    if (errors > 0) return 1;
    return 0;  // --benchmark_list_tests and the like: nothing ran, nothing to write
  }
  if (!existing) report.run["ended_at"] = utc_now();
  bench::merge_benchmarks(report.benchmarks, records);
  write_file_atomically(json_path, report_to_json(report).dump(2) + "\n");
  std::cerr << "torchconform: wrote " << records.size() << " benchmark record(s) to " << json_path << '\n';
  return errors > 0 ? 1 : 0;
}

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
  std::vector<std::string> metric_thresholds, base_env, next_env, bench_flags;
  bool strict = false;
};

// `ab BASE NEW`: paired rounds of both builds' benchmarks (harness/ab/ab.h for the statistics,
// harness/ab/run.h for the launching). Exit 0: no regression; 1: a regression (strict: or an
// inconclusive benchmark); 2: bad input, a program that is not torchconform, a failing child run.
int cmd_ab(const AbArgs& a, int argc, char** argv) {
  AbOptions options;
  options.set_threshold(parse_percent(a.threshold)).set_strict(a.strict).set_cpu_time(a.time == "cpu");
  for (const std::string& m : a.metric_thresholds) {
    auto [name, t] = parse_metric_threshold(m);
    options.metric_threshold(name, t);
  }
  const bool by_repetition = a.pairing == "repetition";
  const int rounds = a.rounds_given ? a.rounds : (by_repetition ? 30 : 10);
  if (rounds < 1) throw UsageError("--rounds must be at least 1");
  if (a.time_budget_s < 0) throw UsageError("--time-budget must not be negative");
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
  spec.pairing = by_repetition ? AbPairing::kRepetition : AbPairing::kRun;
  spec.rounds = rounds;
  spec.time_budget_s = a.time_budget_s;
  spec.seed = a.seed_given ? a.seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  spec.bench_flags = a.bench_flags;
  spec.child_timeout = std::chrono::seconds(env_positive_int("TORCHCONFORM_AB_TIMEOUT_S", 600));

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
  info.bench_flags = by_repetition ? a.bench_flags : ab_bench_flags(a.bench_flags);
  info.seed = spec.seed;
  info.planned_rounds = rounds;

  check_is_torchconform(spec.base, std::chrono::seconds(120));
  check_is_torchconform(spec.next, std::chrono::seconds(120));
  std::cerr << "torchconform ab: " << rounds << " round(s)" << (by_repetition ? " of one repetition of each build" : "");
  if (a.time_budget_s > 0) std::cerr << " or " << a.time_budget_s << " s";
  std::cerr << ", order seed " << spec.seed << " (--seed " << spec.seed << " repeats the orders)\n";
  const AbRunLog log = by_repetition
      ? run_ab_interleaved(spec, [](const std::string& line) { std::cerr << "torchconform ab: " << line << '\n'; })
      : run_ab_rounds(spec, [](const AbRoundLog& rl, const AbRound& round, int planned) {
    std::ostringstream line;
    line << "torchconform ab: round " << rl.index + 1 << "/" << planned << " ("
         << (rl.base_first ? "BASE, NEW" : "NEW, BASE") << "; load " << rl.load1 << "):";
    const AbResult one = ab_compare({round}, AbOptions{});
    int shown = 0;
    for (const AbBench& b : one.benchmarks) {
      if (b.ratios.empty()) continue;
      if (shown++ == 3) {
        line << " ...";
        break;
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, " %.4g -> %.4g %s (x%.3f)", b.base[0], b.next[0], b.unit.c_str(), b.ratios[0]);
      line << (shown > 1 ? ";" : "") << ' ' << b.name << buf;
    }
    std::cerr << line.str() << '\n';
  });
  info.stopped_by_budget = log.stopped_by_budget;
  info.iterations = log.iterations;
  if (by_repetition) info.turn_flags = log.turn_flags;
  info.wall_s = log.wall_s;
  info.ended_at = utc_now();
  info.environment = diff_environment(log.base_environment, log.next_environment);
  const AbResult result = ab_compare(log.rounds, options);
  std::cout << render_ab_text(info, result);
  if (!a.json.empty()) {
    write_file_atomically(a.json, ab_to_json(info, result).dump(2) + "\n");
    std::cerr << "torchconform: wrote " << a.json << '\n';
  }
  if (!a.html.empty()) {
    write_file_atomically(a.html, render_ab_html(info, result));
    std::cerr << "torchconform: wrote " << a.html << '\n';
  }
  return exit_code_for(result);
}

struct TrendArgs {
  std::vector<std::string> files;
  std::string html, threshold = "5%";
  int window = 3;
};

// Exit 0: no persistent regression; 1: one; 2: bad input.
int cmd_trend(const TrendArgs& a) {
  TrendOptions o;
  o.window = a.window;
  o.threshold = parse_percent(a.threshold);
  if (a.window < 1) throw UsageError("--window must be at least 1");
  std::vector<Report> runs;
  std::vector<std::string> labels;
  for (const std::string& f : a.files) {
    runs.push_back(read_comparable_file(f));
    const json& started = runs.back().run.is_object() && runs.back().run.contains("started_at")
                              ? runs.back().run["started_at"] : json();
    labels.push_back(started.is_string() && !started.get<std::string>().empty()
                         ? started.get<std::string>() + " (" + posix_fs::base_name(f) + ")"
                         : f);
  }
  const Trend t = compute_trend(runs, labels, o);
  std::cout << render_trend_text(t);
  if (!a.html.empty()) {
    write_file_atomically(a.html, render_trend_html(t));
    std::cerr << "torchconform: wrote " << a.html << '\n';
  }
  return exit_code_for(t);
}

// The one usage-error path: a command's bad usage, bad input or a write that cannot complete ends
// here with its message and exit 2 (nothing already written is lost: every write is atomic).
template <typename Fn>
int guarded(Fn&& command) {
  try {
    return command();
  } catch (const std::exception& e) {
    std::cerr << "torchconform: " << e.what() << '\n';
    return kExitUsage;
  }
}

}  // namespace

int cli_main(int argc, char** argv) {
  CLI::App app{
      "torchconform: conformance and benchmark suite for PyTorch training practices.\n"
      "Every practice runs as a correct reference beside deliberately broken variants; a check\n"
      "counts only when the reference passes and every variant it targets is caught.\n"
      "Exit codes: 0 every cell ok or skipped, 1 a cell missed / false_alarm / fail / error, 2 bad usage, "
      "77 every cell skipped (nothing checked)."};
  app.require_subcommand(1);
  if (argc >= 2 && std::string(argv[1]) == "bench") return guarded([&] { return cmd_bench(argc, argv); });

  bool list_json = false;
  auto* list = app.add_subcommand("list", "List checks, recipes (and which checks must catch each "
                                          "broken variant) and devices");
  list->add_flag("--json", list_json, "Print the catalogue as JSON");

  RunArgs ra;
  auto* run = app.add_subcommand("run", "Run the matrix check x recipe x device and write a report");
  run->add_option("--device", ra.device, "cpu | cuda | auto (best available) | all")
      ->capture_default_str();
  run->add_option("--check", ra.checks, "Only these checks (comma-separated)");
  run->add_option("--recipe", ra.recipes, "Only these recipes (comma-separated)");
  run->add_option("--seed", ra.seed, "Seed of the reference runs")->capture_default_str();
  run->add_flag("--quick", ra.quick, "Shorter runs (fewer steps)");
  run->add_flag("--sweep", ra.sweep,
                "Also run the costly measured sweeps (data_saturation's workers x prefetch, about 15 s a recipe) "
                "for recipes other than the suite's reference, which always gets them");
  run->add_flag("--no-distributed", ra.no_distributed,
                "Leave out the multi-process checks (they launch torchrun: 2 ranks with Gloo on the CPU, "
                "one rank per GPU with NCCL)");
  run->add_option("--work-dir", ra.work_dir,
                  "Under torchrun: the directory every rank of a multi-process check shares (the same "
                  "path on every node; default reports/distributed/<torchrun run id>)");
  run->add_option("--part", ra.part,
                  "Run only this part of the one cell given (what a check starts in a fresh process of "
                  "this program, e.g. reproducibility's run in another process)");
  run->add_option("--parse-memory-mb", ra.parse_memory_mb,
                  "Memory a checkpoint's first parse may take, in MiB (default 4096): LibTorch's reader meets a "
                  "file first in a child process under this and --parse-seconds; a file over either is refused");
  run->add_option("--parse-seconds", ra.parse_seconds, "Time a checkpoint's first parse may take (default 60)");
  run->add_option("--json", ra.json_path, "Report JSON path ('' to skip)")->capture_default_str();
  run->add_option("--html", ra.html_path, "Report HTML path ('' to skip)")->capture_default_str();
  run->footer(
      "Environment: TORCHCONFORM_THREADS=N sets LibTorch's intra-op threads for the whole run (every cell and "
      "the processes it starts; recorded in the report); TORCHCONFORM_PARSE_MEMORY_MB and "
      "TORCHCONFORM_PARSE_SECONDS are what --parse-memory-mb and --parse-seconds set. Exit 0 every cell as expected, 1 a cell missed, "
      "false_alarm, fail or error, 77 every cell skipped, 2 bad usage or input.");

  std::string report_in, report_html;
  auto* report = app.add_subcommand("report", "Render a report JSON as HTML");
  report->add_option("RUN.json", report_in, "A report written by `run`")->required();
  report->add_option("--html", report_html, "Output HTML path")->required();

  app.add_subcommand("bench", "Run the benchmarks through Google Benchmark and fold them into a report "
                              "(`bench --help`; flags pass to Google Benchmark)");

  CompareArgs ca;
  auto* compare = app.add_subcommand(
      "compare",
      "Compare two reports (torchconform JSON or Google Benchmark JSON) and gate: exit 0 nothing "
      "regressed, 1 a benchmark regressed, a verdict got worse or (with --numerics) numerics failed, 2 bad input");
  compare->add_option("BASE.json", ca.base, "The baseline report")->required();
  compare->add_option("NEW.json", ca.next, "The new report")->required();
  compare->add_option("--html", ca.html, "Also write the comparison as HTML");
  compare->add_option("--threshold", ca.threshold,
                      "Smallest change of a median that counts as a regression (with p < 0.05)")
      ->capture_default_str();
  compare->add_option("--metric-threshold", ca.metric_thresholds,
                      "NAME=PCT: another threshold for one benchmark (repeatable)");
  compare->add_option("--numerics", ca.numerics,
                      "Whether numerics drift between the reports' training fingerprints gates: off (reported, "
                      "not gating), tolerant (a diverged cell fails), strict (any cell not bitwise identical fails)")
      ->capture_default_str();
  compare->add_option("--numerics-tolerance", ca.numerics_tolerance,
                      "Relative difference of a loss (or the final parameters' L2 norm, max |x|) beyond which a "
                      "cell diverged (default 2^-10, about 0.098%; see docs/benchmarks-and-gating.md)");

  AbArgs aa;
  auto* ab = app.add_subcommand(
      "ab",
      "Paired A/B benchmarking of two builds: BASE and NEW run side by side and take turns, one repetition "
      "of a benchmark each, in an order drawn per round (--pairing run: rounds of a short `bench` of each); "
      "per benchmark the median of the per-round ratios NEW/BASE with its 95% interval against --threshold. "
      "Exit 0 no regression, 1 a regression, 2 bad input");
  ab->add_option("BASE", aa.base, "The baseline: a torchconform binary, or a build directory holding one")->required();
  ab->add_option("NEW", aa.next, "The new build: a torchconform binary, or a build directory holding one")->required();
  ab->add_option("BENCH_FLAGS", aa.bench_flags,
                 "After --: Google Benchmark flags for the builds' bench (e.g. --benchmark_filter=reference/; "
                 "--benchmark_min_time=S sets a repetition's length, default 0.1 s; with --pairing run "
                 "default --benchmark_repetitions=3 --benchmark_min_time=0.1 per round)");
  ab->add_option("--pairing", aa.pairing,
                 "repetition: both builds run at once and alternate repetitions (a round is one repetition of "
                 "each, a fraction of a second apart); run: a round is one `bench` process of each, seconds apart")
      ->check(CLI::IsMember({"repetition", "run"}))
      ->capture_default_str();
  auto* rounds_opt = ab->add_option("--rounds", aa.rounds,
                 "Rounds: pairs of repetitions per benchmark (default 30), or with --pairing run pairs of bench "
                 "runs (default 10)");
  ab->add_option("--time-budget", aa.time_budget_s,
                 "Seconds: no new round starts after this (0: no budget; --rounds stays the most)")
      ->capture_default_str();
  auto* seed_opt = ab->add_option("--seed", aa.seed, "Seed of the rounds' order (default: random, printed)");
  ab->add_option("--threshold", aa.threshold,
                 "Smallest change of the median ratio that counts (its whole interval beyond it)")
      ->capture_default_str();
  // Repeatable options take one value per occurrence (allow_extra_args(false)): otherwise the last
  // one also swallows the bench flags after --.
  ab->add_option("--metric-threshold", aa.metric_thresholds,
                 "NAME=PCT: another threshold for one benchmark (repeatable)")
      ->allow_extra_args(false);
  ab->add_flag("--strict", aa.strict, "An inconclusive benchmark fails the gate (exit 1)");
  ab->add_option("--time", aa.time,
                 "real | cpu: a round's value from real (wall-clock) time, or from the CPU time of the benchmark's "
                 "thread (steadier on a machine shared with other jobs; blind to waiting, so only for benchmarks "
                 "whose work runs on the thread that times it, such as reference/train_step with its one LibTorch thread)")
      ->check(CLI::IsMember({"real", "cpu"}))
      ->capture_default_str();
  ab->add_option("--base-env", aa.base_env, "VAR=VALUE for BASE's runs only (repeatable)")
      ->allow_extra_args(false);
  ab->add_option("--new-env", aa.next_env,
                 "VAR=VALUE for NEW's runs only (repeatable; test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N)")
      ->allow_extra_args(false);
  ab->add_option("--json", aa.json, "Also write the result as JSON (schema torchconform.ab/1)");
  ab->add_option("--html", aa.html, "Also write the result as HTML");

  TrendArgs ta;
  auto* trend = app.add_subcommand(
      "trend", "Each benchmark's median over runs (oldest first); flags a step change that persists "
               "(the last --window medians all beyond --threshold of the earlier runs' median). Exit 1 on a "
               "persistent regression");
  trend->add_option("RUNS", ta.files, "Report JSON files, oldest first")->required();
  trend->add_option("--html", ta.html, "Also write the trend as HTML");
  trend->add_option("--threshold", ta.threshold, "Step size that counts")->capture_default_str();
  trend->add_option("--window", ta.window, "How many latest runs must agree")->capture_default_str();

  qualify::Args qa;
  std::string qa_floor = "30%";
  auto* qualify = app.add_subcommand(
      "qualify",
      "Run the same short probes on every device at once (matmul TFLOP/s, copy and host-to-device GB/s, "
      "all-reduce busbw, a same-seed training fingerprint) and name the device that is off the others: "
      "exit 0 none flagged, 1 a device flagged, 2 bad usage or launch failure (docs/qualify.md)");
  qualify->add_option("--device", qa.device, "cpu (N ranks with Gloo) | cuda (one rank per GPU, NCCL)")
      ->capture_default_str();
  qualify->add_option("--nproc", qa.nproc,
                      "Ranks (CPU default TORCHCONFORM_DIST_NPROC, else 2; CUDA default every GPU)");
  qualify->add_option("--json", qa.json_path, "Also write the report as JSON (torchconform.qualify/1)");
  qualify->add_option("--html", qa.html_path, "Also write the report as a self-contained HTML page");
  qualify->add_option("--k", qa.bounds.k, "Bound in MADs of the other ranks (scaled by 1.4826)")
      ->capture_default_str();
  qualify->add_option("--floor", qa_floor, "Smallest bound, in percent of the other ranks' median")
      ->capture_default_str();
  qualify->add_option("--reps", qa.repetitions, "Repetitions of each probe (the median is judged)")
      ->capture_default_str();
  qualify->add_option("--timeout", qa.timeout_s,
                      "Seconds before the torchrun launch is killed (default TORCHCONFORM_QUALIFY_TIMEOUT_S, else 300)");
  qualify->add_option("--raw", qa.raw_path, "")->group("");  // internal: a launched rank 0 hands its figures back

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  return guarded([&] {
    if (*list) return cmd_list(list_json);
    if (*run) return cmd_run(ra, argc, argv);
    if (*report) return cmd_report(report_in, report_html);
    if (*compare) return cmd_compare(ca);
    if (*trend) return cmd_trend(ta);
    if (*ab) {
      aa.seed_given = seed_opt->count() > 0;
      aa.rounds_given = rounds_opt->count() > 0;
      return cmd_ab(aa, argc, argv);
    }
    if (*qualify) {
      qa.bounds.floor = parse_percent(qa_floor);
      const Report header = report_header(argc, argv, 0, json::array({qa.device}));
      return qualify::run_command(qa, {{"tool", header.tool}, {"run", header.run}, {"environment", header.environment}},
                                  self_executable());
    }
    return kExitUsage;
  });
}

}  // namespace tc
