#include <algorithm>
#include <cstdio>
#include <sstream>

#include "harness/ab/ab_report.h"
#include "harness/instructions.h"
#include "harness/util/statistics.h"
#include "harness/util/text_format.h"

namespace tc {
namespace {

using fmt::num;
using fmt::pct;
using fmt::ratio;

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

std::string ab_env_text(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string s;
  for (const auto& [k, v] : env) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s;
}

std::string ab_round_description(const AbRunInfo& run) {
  std::string flags;
  for (const std::string& f : run.pairing == "run" ? run.bench_flags : run.turn_flags) flags += " " + f;
  if (run.pairing == "run") return "a `bench" + flags + "` of each build, one after the other";
  if (run.instructions) {
    // Counts do not depend on what else runs: both builds are counted at once, no turns.
    std::string s = "one counted repetition of each build, both counted at the same time under valgrind "
                    "(`bench --measure instructions --iterations N" + flags + "`, N per benchmark:";
    for (size_t i = 0; i < run.iterations.size(); ++i) {
      s += (i ? ", " : " ") + run.iterations[i].first + " " + std::to_string(run.iterations[i].second);
    }
    return s + ")";
  }
  std::string s = "one repetition of each build, the two running side by side and taking turns (`bench --iterations N" +
                  flags + "`, N per benchmark:";
  for (size_t i = 0; i < run.iterations.size(); ++i) {
    s += (i ? ", " : " ") + run.iterations[i].first + " " + std::to_string(run.iterations[i].second);
  }
  return s + ")";
}

std::string ab_gate_line(const AbResult& r) {
  std::ostringstream s;
  s << "ab gate: " << (exit_code_for(r) ? "FAIL" : "PASS") << " (" << r.count(AbStatus::kRegression)
    << " regressed, " << r.count(AbStatus::kInconclusive) << " inconclusive"
    << (r.options.strict ? " (strict: fails)" : "") << ", " << r.count(AbStatus::kUnchanged) << " unchanged, "
    << r.count(AbStatus::kImprovement) << " improved)";
  return s.str();
}

std::string render_ab_text(const AbRunInfo& run, const AbResult& r) {
  std::ostringstream s;
  s << "torchconform ab\n  base: " << run.base_arg << " (" << run.base_binary << ")";
  if (!run.base_env.empty()) s << " with " << ab_env_text(run.base_env);
  s << "\n  new:  " << run.next_arg << " (" << run.next_binary << ")";
  if (!run.next_env.empty()) s << " with " << ab_env_text(run.next_env);
  s << "\n  rounds: " << r.rounds << " of " << run.planned_rounds << (run.stopped_by_budget ? " (time budget spent)" : "")
    << ", order seed " << run.seed << ", " << num(run.wall_s) << " s; pairing " << run.pairing << ": each round is "
    << ab_round_description(run);
  std::vector<double> loads;
  for (const AbRoundInfo& i : r.round_info) {
    if (i.load1 >= 0) loads.push_back(i.load1);
  }
  if (!loads.empty()) {
    s << "\n  load average (1 min) at the rounds' start: " << num(*std::min_element(loads.begin(), loads.end()))
      << " to " << num(*std::max_element(loads.begin(), loads.end())) << ", median " << num(stats::median(loads));
  }
  s << "\n  rule: per round ratio NEW/BASE (each side's "
    << (run.pairing == "run" ? "median of its repetitions' " : "repetition's ")
    << (r.options.instructions ? "instructions per iteration, counted under valgrind"
        : r.options.cpu_time   ? "CPU time"
                               : "real time")
    << "); regression when the "
    << pct(r.options.level) << " interval of the median ratio lies wholly beyond the threshold (" << pct(r.options.threshold);
  for (const auto& [name, t] : r.options.metric_thresholds) s << "; " << name << ": " << pct(t);
  s << ") in the worse direction, unchanged when it lies within it, inconclusive otherwise"
    << (r.options.strict ? " (strict: inconclusive fails)" : " (passes)") << "\n\n";

  if (run.environment.empty()) {
    s << "environment: identical\n";
  } else {
    s << "environment: " << run.environment.size() << " difference(s)\n";
    for (const EnvChange& e : run.environment) s << "  " << pad(e.key, 40) << e.base << " -> " << e.next << '\n';
  }

  s << "\nbenchmarks: " << r.benchmarks.size() << '\n';
  if (!r.benchmarks.empty()) {
    s << "  " << pad("name", 34) << pad("device", 7) << pad("unit", 6) << pad("pairs", 6) << pad("base", 10)
      << pad("new", 10) << pad("ratio", 7) << pad("interval", 17) << pad("threshold", 10) << "status\n";
  }
  for (const AbBench& b : r.benchmarks) {
    const bool paired = !b.ratios.empty();
    std::string interval = "-";
    if (b.ratio.has_interval) interval = std::string("[").append(ratio(b.ratio.lo)).append(", ").append(ratio(b.ratio.hi)).append("]");
    s << "  " << pad(b.name, 34) << pad(b.device, 7) << pad(b.unit, 6) << pad(std::to_string(b.ratios.size()), 6)
      << pad(paired ? num(stats::median(b.base)) : "-", 10) << pad(paired ? num(stats::median(b.next)) : "-", 10)
      << pad(paired ? ratio(b.ratio.median) : "-", 7) << pad(interval, 17) << pad(pct(b.threshold), 10)
      << (b.status == AbStatus::kRegression ? "REGRESSION" : to_string(b.status));
    if (b.status == AbStatus::kRegression || b.status == AbStatus::kImprovement) {
      s << " (" << (b.direction == Direction::kLowerIsBetter ? "lower" : "higher") << " is better)";
    }
    s << '\n';
    if (paired) {
      s << "      ratios by round:";
      for (size_t i = 0; i < b.ratios.size(); ++i) {
        const AbRoundInfo& info = r.round_info[static_cast<size_t>(b.rounds[i])];
        s << ' ' << ratio(b.ratios[i]) << (info.base_first ? "" : "*");
      }
      s << "   (* NEW ran first)\n";
    }
    for (const auto& m : instructions::kCacheMisses) {
      auto it = b.beside.find(m.counter);
      if (it == b.beside.end() || it->second.base.empty()) continue;
      const double mb = stats::median(it->second.base), mn = stats::median(it->second.next);
      s << "      simulated " << m.unit << " per iteration (shown, not judged): base " << mb << ", new " << mn;
      if (mb > 0) s << " (" << ratio(mn / mb) << "x)";
      s << '\n';
    }
    if (!b.note.empty()) s << "      note: " << b.note << '\n';
  }
  s << '\n' << ab_gate_line(r) << '\n';
  return s.str();
}

}  // namespace tc
