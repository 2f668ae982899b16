#include "harness/compare_text.h"
#include "harness/util/text_format.h"

#include <cctype>
#include <cstdio>
#include <map>
#include <sstream>

namespace tc {
namespace {

using fmt::num;
using fmt::num9;

using fmt::signed_pct;

std::string verdict_or(const std::optional<Verdict>& v, const char* none) {
  return v ? to_string(*v) : none;
}

// Two values that print alike in decimal: their hex floats show the bits that differ.
std::string hex_pair(double a, double b) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%a vs %a", a, b);
  return buf;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

std::string gate_line(const Comparison& c) {
  std::ostringstream s;
  const int r = c.regressions(), w = c.worse_cells();
  s << "gate: " << (exit_code_for(c) ? "FAIL" : "PASS") << " (" << r << " benchmark"
    << (r == 1 ? "" : "s") << " regressed, " << w << " verdict" << (w == 1 ? "" : "s") << " worse";
  if (c.options.numerics != NumericsGate::kOff) {
    const int n = c.numerics_failures();
    s << ", " << n << " numerics failure" << (n == 1 ? "" : "s") << " under --numerics " << to_string(c.options.numerics);
  }
  s << ")";
  return s.str();
}

std::string numerics_rule(const CompareOptions& o) {
  std::ostringstream s;
  s << "identical = every loss and the final parameters' sha256 bitwise equal; float rounding = within "
    << num(kRoundingUlps) << " ulps of the larger loss (in float32 for float32 losses); drifted = every loss and the "
    << "parameters' L2 norm and max |x| within " << num(o.numerics_tolerance * 100.0)
    << "% relative (--numerics-tolerance); diverged = beyond it. --numerics " << to_string(o.numerics) << ": "
    << (o.numerics == NumericsGate::kOff        ? "reported, not gating"
        : o.numerics == NumericsGate::kTolerant ? "a diverged cell fails the gate"
                                                : "any cell not bitwise identical fails the gate")
    << "; a broken variant's numerics never gate";
  return s.str();
}

std::string describe_numerics(const NumericsChange& n) {
  std::ostringstream s;
  auto rounding = [&] {
    std::string t;
    if (n.first_difference && n.first_difference != n.first_beyond_rounding) {
      t = "losses first differ at step " + std::to_string(*n.first_difference) + " (" + hex_pair(n.first_base, n.first_next) + "); ";
    }
    if (!n.first_beyond_rounding) return t + "no loss differs by more than float rounding";
    return t + "first step beyond float rounding: " + std::to_string(*n.first_beyond_rounding) + " (" +
           num9(n.rounding_base) + " vs " + num9(n.rounding_next) + ")";
  };
  switch (n.status) {
    case NumericsStatus::kIdentical:
      s << n.steps << " losses and the final parameters (sha256 " << n.params_sha256_base.substr(0, 12)
        << ") bitwise equal";
      break;
    case NumericsStatus::kDrifted:
      if (n.max_rel_diff == 0.0) {
        // Nothing the summaries show differs: only the parameters' bytes (their sha256) do.
        s << n.steps << " losses, the final parameters' L2 norm and max |x| equal; the parameters' sha256 differs ("
          << n.params_sha256_base.substr(0, 12) << " vs " << n.params_sha256_next.substr(0, 12) << ")";
        break;
      }
      s << "largest relative difference " << num(n.max_rel_diff) << " (" << n.max_rel_where << "), within "
        << num(n.tolerance * 100.0) << "%; " << rounding()
        << (n.losses_bitwise_equal ? "; losses bitwise equal, final parameters differ" : "");
      break;
    case NumericsStatus::kDiverged:
      if (n.first_beyond_tolerance) {
        s << "step " << *n.first_beyond_tolerance << " beyond " << num(n.tolerance * 100.0) << "%: loss "
          << num9(n.diverged_base) << " vs " << num9(n.diverged_next);
      } else {
        s << n.detail;
      }
      s << "; largest relative difference " << num(n.max_rel_diff) << " (" << n.max_rel_where << "); " << rounding();
      break;
    case NumericsStatus::kIncomparable: s << n.detail; break;
    case NumericsStatus::kNotRecorded:
      s << "no fingerprint in " << n.absent_from << " (a report from before fingerprints, or a check that did not "
        << "get to train)";
      break;
    case NumericsStatus::kMissing: s << "the cell is not in " << n.absent_from; break;
  }
  return s.str();
}

std::string render_compare_text(const Comparison& c) {
  std::ostringstream s;
  s << "torchconform compare\n  base: " << c.base_label << "\n  new:  " << c.next_label
    << "\n  rule: regression = Mann-Whitney U p < " << num(c.options.alpha)
    << " (two-sided) and median worse by more than " << signed_pct(c.options.threshold).substr(1);
  for (const auto& [name, t] : c.options.metric_thresholds) s << "; " << name << ": " << signed_pct(t).substr(1);
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

  s << "\nnumerics: ";
  if (c.numerics.empty()) {
    s << "no training fingerprint in either report\n";
  } else {
    std::map<std::string, int> counts;
    for (const NumericsChange& n : c.numerics) ++counts[to_string(n.status)];
    s << c.numerics.size() << " cell(s) with a training fingerprint:";
    bool first = true;
    for (NumericsStatus st : {NumericsStatus::kIdentical, NumericsStatus::kDrifted, NumericsStatus::kDiverged,
                              NumericsStatus::kIncomparable, NumericsStatus::kNotRecorded, NumericsStatus::kMissing}) {
      if (!counts.count(to_string(st))) continue;
      s << (first ? " " : ", ") << counts[to_string(st)] << ' ' << to_string(st);
      first = false;
    }
    s << "\n  rule: " << numerics_rule(c.options) << '\n';
    int quiet_variants = 0;
    for (const NumericsChange& n : c.numerics) {
      if (n.variant && n.status == NumericsStatus::kIdentical) {
        ++quiet_variants;  // counted, not listed: the suite's broken variants are many
        continue;
      }
      std::string tag = to_string(n.status);
      if (numerics_fails(n, c.options.numerics)) {
        for (char& ch : tag) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      }
      s << "  " << pad(tag, 13) << n.check << " / " << n.recipe << " / " << n.device << ": " << describe_numerics(n)
        << (n.variant ? " [broken variant: not gating]" : "") << '\n';
    }
    if (quiet_variants > 0) {
      s << "  (and " << quiet_variants << " broken variant cell(s) identical, not listed)\n";
    }
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
      << pad(both && b.status != BenchStatus::kUnitChanged ? signed_pct(b.change) : "-", 9)
      << pad(b.test ? num(b.test->p) : "-", 10) << pad(b.test ? stats::to_string(b.test->method) : "-", 11)
      << (b.status == BenchStatus::kRegression ? (b.gating ? "REGRESSION" : "regression (not gating)")
                                                 : to_string(b.status));
    if (b.status == BenchStatus::kRegression || b.status == BenchStatus::kImprovement) {
      s << " (" << (b.direction == Direction::kLowerIsBetter ? "lower" : "higher") << " is better, threshold "
        << signed_pct(b.threshold).substr(1) << ")";
    }
    s << '\n';
    for (const std::string& w : b.warnings) s << "      warning: " << w << '\n';
  }
  s << '\n' << gate_line(c) << '\n';
  return s.str();
}

}  // namespace tc
