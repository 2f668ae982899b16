#include "harness/ab_run.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "harness/launch.h"
#include "harness/report_json.h"
#include "harness/scratch.h"

namespace tc {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string absolute(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

// One child: `argv` with side.env added, output to `log`. Throws with the output's tail when it
// times out or exits non-zero.
dist_launch::Result launch(const AbSide& side, std::vector<std::string> argv, const std::string& log,
                           std::chrono::seconds timeout, const std::string& what) {
  dist_launch::Spec spec;
  spec.argv = std::move(argv);
  spec.env = side.env;
  spec.log_path = log;
  spec.timeout = timeout;
  const dist_launch::Result r = dist_launch::run(spec);
  if (r.timed_out) {
    throw std::runtime_error(what + " did not finish in " + std::to_string(timeout.count()) +
                             " s and was stopped; its output ended with:\n" + dist_launch::tail_of(log, 2000));
  }
  if (r.exit_code != 0) {
    throw std::runtime_error(what + " failed (exit " + std::to_string(r.exit_code) + "); its output ended with:\n" +
                             dist_launch::tail_of(log, 2000));
  }
  return r;
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
  dist_launch::Spec spec;
  spec.argv = {"/bin/sh", "-c", "exec \"$0\" list --json > \"$1\"", side.binary, out};
  spec.env = side.env;
  spec.log_path = scratch.file("list.log");
  spec.timeout = timeout;
  const dist_launch::Result r = dist_launch::run(spec);
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
                           " list --json` " + error + ":\n" + dist_launch::tail_of(spec.log_path, 1000) +
                           dist_launch::tail_of(out, 500));
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
                       const std::function<void(const AbRoundLog&, const AbRound&, int)>& on_round) {
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
    AbRoundLog rl;
    rl.index = i;
    rl.base_first = round.base_first = orders[static_cast<size_t>(i)];
    rl.load1 = round.load1 = load_average_1min();
    for (int s = 0; s < 2; ++s) {
      const bool base = (s == 0) == round.base_first;
      const AbSide& side = base ? spec.base : spec.next;
      const std::string stem = scratch.file("round" + std::to_string(i) + (base ? "-base" : "-new"));
      std::vector<std::string> argv{side.binary, "bench", "--json", stem + ".json"};
      argv.insert(argv.end(), flags.begin(), flags.end());
      const std::string what = "round " + std::to_string(i + 1) + ": " + side.label + " '" + side.arg + "' bench";
      const dist_launch::Result r = launch(side, argv, stem + ".log", spec.child_timeout, what);
      Report rep;
      try {
        rep = read_report_file(stem + ".json");
      } catch (const std::exception& e) {
        throw std::runtime_error(what + " wrote no readable report (" + e.what() + "); its output ended with:\n" +
                                 dist_launch::tail_of(stem + ".log", 2000));
      }
      if (rep.benchmarks.empty()) {
        throw std::runtime_error(what + " ran no benchmark; its output ended with:\n" +
                                 dist_launch::tail_of(stem + ".log", 2000));
      }
      (base ? rl.base_wall_s : rl.next_wall_s) = r.wall_s;
      if (i == 0) (base ? log.base_environment : log.next_environment) = rep.environment;
      (base ? round.base : round.next) = std::move(rep.benchmarks);
    }
    if (on_round) on_round(rl, round, spec.rounds);
    log.round_logs.push_back(rl);
    log.rounds.push_back(std::move(round));
  }
  log.wall_s = elapsed();
  return log;
}

}  // namespace tc
