#include "harness/ab/ab_launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "harness/ab/turns.h"
#include "harness/child_process.h"
#include "harness/contract/scratch.h"
#include "harness/instructions.h"
#include "harness/report_json.h"

namespace tc {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// Throws, with the output's tail, when a child timed out (`limit`: how long it had) or exited non-zero.
void check_child(const child::Result& r, const std::string& what, const std::string& log,
                 const std::string& limit) {
  if (r.timed_out) {
    throw std::runtime_error(what + " did not finish in " + limit + " and was stopped; its output ended with:\n" +
                             child::tail_of(log, 2000));
  }
  if (r.exit_code != 0) {
    throw std::runtime_error(what + " failed (exit " + std::to_string(r.exit_code) + "); its output ended with:\n" +
                             child::tail_of(log, 2000));
  }
}

// One child: `argv` with side.env added, output to `log`; check_child() on its end.
child::Result launch(const AbSide& side, std::vector<std::string> argv, const std::string& log,
                           std::chrono::seconds timeout, const std::string& what) {
  child::Spec spec;
  spec.argv = std::move(argv);
  spec.env = side.env;
  spec.log_path = log;
  spec.timeout = timeout;
  const child::Result r = child::run(spec);
  check_child(r, what, log, std::to_string(timeout.count()) + " s");
  return r;
}

// The report a child bench wrote to `stem`.json; throws with its output's tail (`stem`.log) when
// there is none to read.
Report read_child_report(const std::string& stem, const std::string& what) {
  try {
    return read_report_file(stem + ".json");
  } catch (const std::exception& e) {
    throw std::runtime_error(what + " wrote no readable report (" + e.what() + "); its output ended with:\n" +
                             child::tail_of(stem + ".log", 2000));
  }
}

}  // namespace

std::vector<std::string> ab_bench_flags(const std::vector<std::string>& given) {
  bool reps = false, min_time = false;
  for (const std::string& f : given) {
    reps = reps || starts_with(f, "--benchmark_repetitions");
    min_time = min_time || starts_with(f, "--benchmark_min_time");
  }
  std::vector<std::string> out;
  if (!reps) out.push_back("--benchmark_repetitions=3");
  if (!min_time) out.push_back("--benchmark_min_time=0.1");
  out.insert(out.end(), given.begin(), given.end());
  return out;
}

std::string resolve_torchconform_binary(const std::string& arg) {
  struct stat st {};
  if (arg.empty() || stat(arg.c_str(), &st) != 0) {
    throw std::runtime_error("'" + arg + "' does not exist (give a torchconform binary or a build directory holding one)");
  }
  std::string path = arg;
  if (S_ISDIR(st.st_mode)) {
    path = arg + (arg.back() == '/' ? "" : "/") + "torchconform";
    if (stat(path.c_str(), &st) != 0) {
      throw std::runtime_error("the directory '" + arg + "' holds no torchconform binary (looked for " + path + ")");
    }
  }
  if (!S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0) {
    throw std::runtime_error("'" + path + "' is not an executable file");
  }
  return absolute(path);
}

void check_is_torchconform(const AbSide& side, std::chrono::seconds timeout) {
  Scratch scratch("torchconform-ab-check-");
  const std::string out = scratch.file("list.json");
  // stdout alone to the file that is parsed (warnings on stderr go to the log).
  child::Spec spec;
  spec.argv = {"/bin/sh", "-c", "exec \"$0\" list --json > \"$1\"", side.binary, out};
  spec.env = side.env;
  spec.log_path = scratch.file("list.log");
  spec.timeout = timeout;
  const child::Result r = child::run(spec);
  std::string error;
  if (r.timed_out) {
    error = "did not answer in " + std::to_string(timeout.count()) + " s";
  } else if (r.exit_code != 0) {
    error = "exited with " + std::to_string(r.exit_code);
  } else {
    try {
      const nlohmann::json j = read_json_file(out);
      if (j.is_object() && j.contains("checks") && j.contains("recipes") && j.contains("devices")) return;
      error = "printed JSON that is not torchconform's catalogue";
    } catch (const std::exception&) {
      error = "did not print torchconform's catalogue";
    }
  }
  throw std::runtime_error(side.label + " '" + side.arg + "' is not a torchconform binary: `" + side.binary +
                           " list --json` " + error + ":\n" + child::tail_of(spec.log_path, 1000) +
                           child::tail_of(out, 500));
}

std::pair<std::string, std::string> parse_env_assignment(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument("'" + text + "' is not VAR=VALUE (write e.g. TORCHCONFORM_BENCH_SLOWDOWN_MS=1)");
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

double load_average_1min() {
  std::ifstream in("/proc/loadavg");
  double v = -1.0;
  if (in >> v) return v;
  return -1.0;
}

AbRunLog run_ab_rounds(const AbRunSpec& spec,
                       const std::function<void(const AbRound&, int)>& on_round) {
  Scratch scratch("torchconform-ab-");
  const std::vector<bool> orders = ab_orders(spec.seed, spec.rounds);
  const std::vector<std::string> flags = ab_bench_flags(spec.bench_flags);
  AbRunLog log;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  for (int i = 0; i < spec.rounds; ++i) {
    if (spec.time_budget_s > 0 && i > 0 && elapsed() >= spec.time_budget_s) {
      log.stopped_by_budget = true;
      break;
    }
    AbRound round;
    round.info.index = i;
    round.info.base_first = orders[static_cast<size_t>(i)];
    round.info.load1 = load_average_1min();
    for (int s = 0; s < 2; ++s) {
      const bool base = (s == 0) == round.info.base_first;
      const AbSide& side = base ? spec.base : spec.next;
      const std::string stem = scratch.file("round" + std::to_string(i) + (base ? "-base" : "-new"));
      std::vector<std::string> argv{side.binary, "bench", "--json", stem + ".json"};
      argv.insert(argv.end(), flags.begin(), flags.end());
      const std::string what = "round " + std::to_string(i + 1) + ": " + side.label + " '" + side.arg + "' bench";
      const child::Result r = launch(side, argv, stem + ".log", spec.child_timeout, what);
      Report rep = read_child_report(stem, what);
      if (rep.benchmarks.empty()) {
        throw std::runtime_error(what + " ran no benchmark; its output ended with:\n" +
                                 child::tail_of(stem + ".log", 2000));
      }
      (base ? round.info.base_wall_s : round.info.next_wall_s) = r.wall_s;
      if (i == 0) (base ? log.base_environment : log.next_environment) = rep.environment;
      (base ? round.base : round.next) = std::move(rep.benchmarks);
    }
    if (on_round) on_round(round, spec.rounds);
    log.rounds.push_back(std::move(round));
  }
  log.wall_s = elapsed();
  return log;
}

namespace {

bool flag_named(const std::string& f, const char* name) {
  const size_t n = std::strlen(name);
  return f.compare(0, n, name) == 0 && (f.size() == n || f[n] == '=');
}

// The user's bench flags without those ab sets itself in repetition pairing.
std::vector<std::string> flags_without(const std::vector<std::string>& given, std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  for (const std::string& f : given) {
    bool drop = false;
    for (const char* n : names) drop = drop || flag_named(f, n);
    if (!drop) out.push_back(f);
  }
  return out;
}

std::string flag_value(const std::vector<std::string>& given, const char* name, const std::string& fallback) {
  std::string v = fallback;
  for (const std::string& f : given) {
    if (flag_named(f, name) && f.size() > std::strlen(name)) v = f.substr(std::strlen(name) + 1);
  }
  return v;
}

struct Calibration {
  std::vector<std::pair<std::string, long long>> runs;  // run name -> iterations, in run order
  Report report;
};

// One repetition of every benchmark the flags select, with Google Benchmark's own JSON beside the
// report for the iteration counts.
Calibration calibrate(const AbSide& side, const std::vector<std::string>& user_flags, const Scratch& scratch,
                      std::chrono::seconds timeout) {
  const std::string stem = scratch.file(std::string("calibration-") + (side.label == "BASE" ? "base" : "new"));
  std::vector<std::string> argv{side.binary, "bench", "--json", stem + ".json"};
  for (const std::string& f : flags_without(user_flags, {"--benchmark_repetitions", "--benchmark_min_time",
                                                         "--benchmark_out", "--benchmark_out_format"})) {
    argv.push_back(f);
  }
  argv.push_back("--benchmark_repetitions=1");
  argv.push_back("--benchmark_min_time=" + flag_value(user_flags, "--benchmark_min_time", "0.1"));
  argv.push_back("--benchmark_out=" + stem + ".gbench.json");
  argv.push_back("--benchmark_out_format=json");
  const std::string what = "calibration: " + side.label + " '" + side.arg + "' bench";
  launch(side, argv, stem + ".log", timeout, what);
  Calibration c;
  c.report = read_child_report(stem, what);
  try {
    const nlohmann::json g = read_json_file(stem + ".gbench.json");
    for (const nlohmann::json& b : g.at("benchmarks")) {
      if (b.value("run_type", "") != "iteration" || b.value("error_occurred", false)) continue;
      c.runs.emplace_back(b.at("run_name").get<std::string>(), b.at("iterations").get<long long>());
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(what + " wrote no readable Google Benchmark JSON (" + e.what() +
                             "); its output ended with:\n" + child::tail_of(stem + ".log", 2000));
  }
  if (c.runs.empty()) {
    throw std::runtime_error(what + " ran no benchmark; its output ended with:\n" + child::tail_of(stem + ".log", 2000));
  }
  return c;
}

// A record holding only repetition `i` of `r`.
BenchmarkRecord one_repetition(const BenchmarkRecord& r, size_t i) {
  BenchmarkRecord one;
  one.name = r.name;
  one.device = r.device;
  one.unit = r.unit;
  one.samples = {r.samples[i]};
  if (i < r.cpu_samples.size()) one.cpu_samples = {r.cpu_samples[i]};
  one.median = r.samples[i];
  one.cv = 0.0;
  return one;
}

}  // namespace

std::string exact_filter(const std::string& run_name) {
  auto escape = [](const std::string& text) {
    std::string out;
    for (const char c : text) {
      if (std::strchr("\\^$.|?*+()[]{}", c) != nullptr) out += '\\';
      out += c;
    }
    return out;
  };
  // Google Benchmark's run name is function/args/min_time:/iterations:/repeats:/time type/threads:;
  // --iterations adds (or changes) the iterations part, so the filter lets it be there or not.
  std::vector<std::string> parts;
  std::stringstream ss(run_name);
  for (std::string p; std::getline(ss, p, '/');) parts.push_back(p);
  auto is_suffix = [](const std::string& p) {
    for (const char* t : {"min_time:", "min_warmup_time:", "iterations:", "repeats:", "real_time", "manual_time",
                          "process_time", "threads:"}) {
      if (p.rfind(t, 0) == 0) return true;
    }
    return false;
  };
  size_t i = 1;
  while (i < parts.size() && !is_suffix(parts[i])) ++i;
  std::string head, tail;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k < i) {
      head += (k ? "/" : "") + parts[k];
    } else if (parts[k].rfind("iterations:", 0) != 0) {
      tail += "/" + parts[k];
    }
  }
  return "^" + escape(head) + "(/iterations:[0-9]+)?" + escape(tail) + "$";
}

namespace {

// One build's `bench` of one benchmark, taking its turns through `turns`.
struct TurnSide {
  const AbSide* side = nullptr;
  std::string dir, stem;
  std::unique_ptr<TurnGiver> turns;
  std::unique_ptr<child::Process> process;
  std::string what;  // for errors: "BASE 'build-a' bench of NAME"
};

void start_turn_side(TurnSide& x, const AbRunSpec& spec, const AbSide& side, const Scratch& scratch, size_t k,
                     const std::string& run_name, long long iterations, const std::vector<std::string>& turn_flags,
                     const char* tag) {
  x.side = &side;
  x.dir = scratch.file("turns" + std::to_string(k) + tag);
  x.stem = scratch.file("bench" + std::to_string(k) + tag);
  x.what = side.label + " '" + side.arg + "' bench of " + run_name;
  if (mkdir(x.dir.c_str(), 0700) != 0) throw std::runtime_error("cannot create " + x.dir);
  x.turns = std::make_unique<TurnGiver>(x.dir);
  std::vector<std::string> argv{side.binary, "bench", "--json", x.stem + ".json", "--ab-turns", x.dir,
                                "--iterations", std::to_string(iterations),
                                "--benchmark_filter=" + exact_filter(run_name),
                                "--benchmark_repetitions=" + std::to_string(spec.rounds)};
  argv.insert(argv.end(), turn_flags.begin(), turn_flags.end());
  child::Spec ls;
  ls.argv = std::move(argv);
  ls.env = side.env;
  ls.log_path = x.stem + ".log";
  ls.timeout = spec.child_timeout;  // per turn (give_turn) and after the last (wait_until in collect_turns)
  x.process = std::make_unique<child::Process>(ls);
}

// The rounds' pairs of turns, in each round's drawn order, until the rounds or the budget end.
int take_turns(const AbRunSpec& spec, TurnSide (&sides)[2], const std::vector<bool>& orders, AbRunLog& log,
               const std::string& run_name, const std::function<double()>& elapsed,
               const std::function<void(const std::string&)>& progress) {
  int pairs = 0;
  try {
    for (int j = 0; j < spec.rounds; ++j) {
      if (spec.time_budget_s > 0 && j > 0 && elapsed() >= spec.time_budget_s) {
        log.stopped_by_budget = true;
        for (TurnSide& x : sides) x.turns->stop();
        break;
      }
      AbRoundInfo& info = log.rounds[static_cast<size_t>(j)].info;
      if (info.load1 < 0) info.load1 = load_average_1min();  // at the round's first pair
      const bool base_first = orders[static_cast<size_t>(j)];
      for (int t = 0; t < 2; ++t) {
        TurnSide& x = sides[(t == 0) == base_first ? 0 : 1];
        x.turns->give_turn([&x] { return !x.process->finished(); }, spec.child_timeout, x.what);
      }
      ++pairs;
      if ((j + 1) % 10 == 0 && j + 1 < spec.rounds) {
        progress(run_name + ": " + std::to_string(j + 1) + "/" + std::to_string(spec.rounds) + " pairs");
      }
    }
  } catch (const std::runtime_error& e) {
    std::string tails;
    for (const TurnSide& x : sides) {
      tails += "\n" + x.side->label + "'s output ended with:\n" + child::tail_of(x.stem + ".log", 1500);
    }
    throw std::runtime_error(std::string(e.what()) + tails);
  }
  return pairs;
}

// Each side's report once it ends: repetition i of each benchmark goes to round i.
void collect_turns(const AbRunSpec& spec, TurnSide (&sides)[2], int pairs, AbRunLog& log) {
  for (int s = 0; s < 2; ++s) {
    TurnSide& x = sides[s];
    // After its last turn a side only writes its report: it gets one turn's time for that.
    const child::Result r = x.process->wait_until(std::chrono::steady_clock::now() + spec.child_timeout);
    check_child(r, x.what, x.stem + ".log", std::to_string(spec.child_timeout.count()) + " s after its last turn");
    const Report rep = read_child_report(x.stem, x.what);
    for (const BenchmarkRecord& b : rep.benchmarks) {
      for (size_t i = 0; i < b.samples.size() && i < static_cast<size_t>(pairs); ++i) {
        AbRound& round = log.rounds[i];
        (s == 0 ? round.base : round.next).push_back(one_repetition(b, i));
      }
    }
  }
}

// What only one side has (never paired): its calibration record, so that the verdict says
// base_only / new_only.
void add_one_sided(const Calibration& cal_base, const Calibration& cal_next, AbRunLog& log) {
  for (int s = 0; s < 2; ++s) {
    const std::vector<BenchmarkRecord>& mine = (s == 0 ? cal_base : cal_next).report.benchmarks;
    const std::vector<BenchmarkRecord>& other = (s == 0 ? cal_next : cal_base).report.benchmarks;
    for (const BenchmarkRecord& b : mine) {
      const bool other_has = std::any_of(other.begin(), other.end(), [&](const BenchmarkRecord& o) {
        return o.name == b.name && o.device == b.device;
      });
      if (!other_has) (s == 0 ? log.rounds[0].base : log.rounds[0].next).push_back(b);
    }
  }
}

}  // namespace

AbRunLog run_ab_interleaved(const AbRunSpec& spec, const std::function<void(const std::string&)>& progress) {
  Scratch scratch("torchconform-ab-");
  const std::vector<bool> orders = ab_orders(spec.seed, spec.rounds);
  AbRunLog log;
  const auto start = std::chrono::steady_clock::now();
  const std::function<double()> elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  progress("calibrating: one repetition of each build's benchmarks (which ones, and how many iterations)");
  Calibration cal_base = calibrate(spec.base, spec.bench_flags, scratch, spec.child_timeout);
  Calibration cal_next = calibrate(spec.next, spec.bench_flags, scratch, spec.child_timeout);
  log.base_environment = cal_base.report.environment;
  log.next_environment = cal_next.report.environment;
  log.turn_flags = flags_without(spec.bench_flags, {"--benchmark_repetitions", "--benchmark_min_time",
                                                   "--benchmark_filter", "--benchmark_out", "--benchmark_out_format"});
  log.rounds.resize(static_cast<size_t>(spec.rounds));
  for (int j = 0; j < spec.rounds; ++j) {
    log.rounds[static_cast<size_t>(j)].info.base_first = orders[static_cast<size_t>(j)];
    log.rounds[static_cast<size_t>(j)].info.index = j;
  }
  int most_pairs = 0;
  for (const auto& [run_name, iterations] : cal_base.runs) {
    const bool in_new = std::any_of(cal_next.runs.begin(), cal_next.runs.end(),
                                    [&](const auto& r) { return r.first == run_name; });
    if (!in_new) continue;
    if (spec.time_budget_s > 0 && most_pairs > 0 && elapsed() >= spec.time_budget_s) {
      log.stopped_by_budget = true;  // no benchmark starts once the budget is spent
      break;
    }
    log.iterations.emplace_back(run_name, iterations);
    progress(run_name + ": " + std::to_string(spec.rounds) + " pairs of repetitions of " + std::to_string(iterations) +
             " iteration(s), BASE and NEW taking turns");
    TurnSide sides[2];
    start_turn_side(sides[0], spec, spec.base, scratch, log.iterations.size(), run_name, iterations, log.turn_flags, "-base");
    start_turn_side(sides[1], spec, spec.next, scratch, log.iterations.size(), run_name, iterations, log.turn_flags, "-new");
    const int pairs = take_turns(spec, sides, orders, log, run_name, elapsed, progress);
    most_pairs = std::max(most_pairs, pairs);
    collect_turns(spec, sides, pairs, log);
  }
  add_one_sided(cal_base, cal_next, log);
  if (most_pairs < spec.rounds) log.rounds.resize(static_cast<size_t>(std::max(most_pairs, 1)));
  log.wall_s = elapsed();
  return log;
}

namespace {

// One build's counting `bench` under valgrind.
struct CountedSide {
  const AbSide* side = nullptr;
  std::string stem, dumps;
  std::unique_ptr<child::Process> process;
};

void start_counted_side(CountedSide& x, const AbRunSpec& spec, const AbSide& side, const std::string& valgrind,
                        const Scratch& scratch, long long iterations, const std::vector<std::string>& turn_flags,
                        const char* name) {
  x.side = &side;
  x.stem = scratch.file(name);
  x.dumps = x.stem + "-dumps";
  if (mkdir(x.dumps.c_str(), 0700) != 0) throw std::runtime_error("cannot create " + x.dumps);
  std::vector<std::string> argv{side.binary, "bench", "--measure", "instructions", "--json", x.stem + ".json",
                                "--iterations", std::to_string(iterations),
                                "--benchmark_repetitions=" + std::to_string(spec.rounds)};
  argv.insert(argv.end(), turn_flags.begin(), turn_flags.end());
  child::Spec ls;
  ls.argv = instructions::wrap_argv(valgrind, x.dumps, argv);
  ls.env = instructions::child_env(x.dumps);
  // The side's own additions last: they win over the counting defaults (a test hook, a thread count).
  ls.env.insert(ls.env.end(), side.env.begin(), side.env.end());
  ls.log_path = x.stem + ".log";
  ls.timeout = spec.child_timeout;
  x.process = std::make_unique<child::Process>(ls);
}

// Repetition j of each counted benchmark as round j's record (time under valgrind: not compared).
void add_counted_rounds(const Report& report, bool base, long long iterations, AbRunLog& log) {
  for (const BenchmarkRecord& b : report.benchmarks) {
    if (base) log.iterations.emplace_back(b.name, iterations);
    auto it = b.counters.find(instructions::kCounter);
    const std::vector<double> none;
    const std::vector<double>& counts = it == b.counters.end() ? none : it->second.samples;
    for (size_t j = 0; j < log.rounds.size(); ++j) {
      BenchmarkRecord one;
      one.name = b.name;
      one.device = b.device;
      one.unit = b.unit;
      if (j < b.samples.size()) one.samples = {b.samples[j]};
      one.median = one.samples.empty() ? b.median : one.samples[0];
      for (const auto& [name, counter] : b.counters) {  // the counts, and the simulated misses beside them
        if (j < counter.samples.size()) {
          one.counters[name] = BenchmarkCounter{std::vector<double>{counter.samples[j]}, counter.samples[j]};
        }
      }
      if (j == 0 || j < counts.size()) (base ? log.rounds[j].base : log.rounds[j].next).push_back(std::move(one));
    }
  }
}

}  // namespace

AbRunLog run_ab_instructions(const AbRunSpec& spec, long long iterations,
                             const std::function<void(const std::string&)>& progress) {
  const std::string valgrind = instructions::find_valgrind();
  if (valgrind.empty()) {
    throw std::runtime_error("--time instructions needs valgrind (Debian's valgrind package; or TORCHCONFORM_VALGRIND=PATH)");
  }
  Scratch scratch("torchconform-ab-");
  const std::vector<bool> orders = ab_orders(spec.seed, spec.rounds);
  AbRunLog log;
  const auto start = std::chrono::steady_clock::now();
  log.turn_flags = flags_without(spec.bench_flags, {"--benchmark_repetitions", "--benchmark_min_time",
                                                   "--benchmark_out", "--benchmark_out_format", "--iterations",
                                                   "--measure"});
  progress("counting instructions under valgrind: " + std::to_string(spec.rounds) + " repetition(s) of " +
           std::to_string(iterations) + " iteration(s) per benchmark, BASE and NEW at the same time (" +
           instructions::valgrind_version(valgrind) + ")");
  CountedSide sides[2];
  start_counted_side(sides[0], spec, spec.base, valgrind, scratch, iterations, log.turn_flags, "counted-base");
  start_counted_side(sides[1], spec, spec.next, valgrind, scratch, iterations, log.turn_flags, "counted-new");
  const double load = load_average_1min();
  std::vector<Report> reports(2);
  for (int s = 0; s < 2; ++s) {
    CountedSide& x = sides[s];
    const std::string what = x.side->label + " '" + x.side->arg + "' counted bench";
    const child::Result r = x.process->wait();
    check_child(r, what, x.stem + ".log", std::to_string(spec.child_timeout.count()) + " s");
    reports[static_cast<size_t>(s)] = read_child_report(x.stem, what);
    (s == 0 ? log.base_environment : log.next_environment) = reports[static_cast<size_t>(s)].environment;
    progress(x.side->label + " counted in " + std::to_string(static_cast<int>(r.wall_s)) + " s");
  }
  const nlohmann::json vg = instructions::environment_block(valgrind, iterations, spec.rounds);
  log.base_environment["valgrind"] = vg;
  log.next_environment["valgrind"] = vg;
  log.rounds.resize(static_cast<size_t>(spec.rounds));
  for (int j = 0; j < spec.rounds; ++j) {
    // Both sides ran at once: the drawn order is kept for the record's shape, it ordered nothing.
    AbRoundInfo& info = log.rounds[static_cast<size_t>(j)].info;
    info.base_first = orders[static_cast<size_t>(j)];
    info.load1 = load;
    info.index = j;
  }
  add_counted_rounds(reports[0], true, iterations, log);
  add_counted_rounds(reports[1], false, iterations, log);
  log.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return log;
}

}  // namespace tc
