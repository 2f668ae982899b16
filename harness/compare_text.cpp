#include "harness/compare_text.h"

#include <cstdio>
#include <sstream>

namespace tc {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", v * 100.0);
  return buf;
}

std::string verdict_or(const std::optional<Verdict>& v, const char* none) {
  return v ? to_string(*v) : none;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

std::string gate_line(const Comparison& c) {
  std::ostringstream s;
  const int r = c.regressions(), w = c.worse_cells();
  s << "gate: " << (exit_code_for(c) ? "FAIL" : "PASS") << " (" << r << " benchmark"
    << (r == 1 ? "" : "s") << " regressed, " << w << " verdict" << (w == 1 ? "" : "s") << " worse)";
  return s.str();
}

std::string render_compare_text(const Comparison& c) {
  std::ostringstream s;
  s << "torchconform compare\n  base: " << c.base_label << "\n  new:  " << c.next_label
    << "\n  rule: regression = Mann-Whitney U p < " << num(c.options.alpha)
    << " (two-sided) and median worse by more than " << pct(c.options.threshold).substr(1);
  for (const auto& [name, t] : c.options.metric_thresholds) s << "; " << name << ": " << pct(t).substr(1);
  s << "\n\n";

  if (c.environment.empty()) {
    s << "environment: identical\n";
  } else {
    s << "environment: " << c.environment.size() << " difference(s)\n";
    for (const EnvChange& e : c.environment) s << "  " << pad(e.key, 40) << e.base << " -> " << e.next << '\n';
  }

  s << "\nverdicts: " << c.cells_compared << " cell(s) in both, " << c.cells.size() << " change(s)\n";
  for (const CellChange& ch : c.cells) {
    const char* tag = ch.worse ? "WORSE  " : !ch.base ? "new    " : !ch.next ? "gone   " : "changed";
    s << "  " << tag << ' ' << ch.check << " / " << ch.recipe << " / " << ch.device << ": "
      << verdict_or(ch.base, "(absent)") << " -> " << verdict_or(ch.next, "(absent)") << '\n';
  }

  s << "\nbenchmarks: " << c.benchmarks.size() << '\n';
  if (!c.benchmarks.empty()) {
    s << "  " << pad("name", 34) << pad("device", 7) << pad("unit", 10) << pad("n", 7) << pad("base", 11)
      << pad("new", 11) << pad("change", 9) << pad("p", 10) << pad("test", 11) << "status\n";
  }
  for (const BenchChange& b : c.benchmarks) {
    const bool both = b.status != BenchStatus::kAdded && b.status != BenchStatus::kRemoved;
    s << "  " << pad(b.name, 34) << pad(b.device, 7) << pad(b.unit, 10)
      << pad(std::to_string(b.base_samples.size()) + "/" + std::to_string(b.next_samples.size()), 7)
      << pad(b.status == BenchStatus::kAdded ? "-" : num(b.base_median), 11)
      << pad(b.status == BenchStatus::kRemoved ? "-" : num(b.next_median), 11)
      << pad(both && b.status != BenchStatus::kUnitChanged ? pct(b.change) : "-", 9)
      << pad(b.test ? num(b.test->p) : "-", 10) << pad(b.test ? stats::to_string(b.test->method) : "-", 11)
      << (b.status == BenchStatus::kRegression ? "REGRESSION" : to_string(b.status));
    if (b.status == BenchStatus::kRegression || b.status == BenchStatus::kImprovement) {
      s << " (" << (b.direction == Direction::kLowerIsBetter ? "lower" : "higher") << " is better, threshold "
        << pct(b.threshold).substr(1) << ")";
    }
    s << '\n';
    for (const std::string& w : b.warnings) s << "      warning: " << w << '\n';
  }
  s << '\n' << gate_line(c) << '\n';
  return s.str();
}

}  // namespace tc
