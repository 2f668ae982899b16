#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "harness/instructions.h"

namespace tc {

using nlohmann::json;

double parse_percent(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '%') t.pop_back();
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0) {
    throw std::invalid_argument("'" + text + "' is not a percentage (write e.g. 5%)");
  }
  return v / 100.0;
}

std::pair<std::string, double> parse_metric_threshold(const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::invalid_argument("'" + text + "' is not NAME=PCT (write e.g. train_step=10%)");
  }
  return {text.substr(0, eq), parse_percent(text.substr(eq + 1))};
}

Direction direction_for_unit(const std::string& unit) {
  const bool per_second = unit.size() >= 2 && unit.compare(unit.size() - 2, 2, "/s") == 0;
  return per_second ? Direction::kHigherIsBetter : Direction::kLowerIsBetter;
}

const char* to_string(BenchStatus s) {
  switch (s) {
    case BenchStatus::kRegression: return "regression";
    case BenchStatus::kImprovement: return "improvement";
    case BenchStatus::kUnchanged: return "unchanged";
    case BenchStatus::kUntested: return "untested";
    case BenchStatus::kAdded: return "added";
    case BenchStatus::kRemoved: return "removed";
    case BenchStatus::kUnitChanged: return "unit_changed";
  }
  return "?";
}

int Comparison::regressions() const {
  return static_cast<int>(std::count_if(benchmarks.begin(), benchmarks.end(), [](const BenchChange& b) {
    return b.status == BenchStatus::kRegression && b.gating;
  }));
}

int Comparison::worse_cells() const {
  return static_cast<int>(
      std::count_if(cells.begin(), cells.end(), [](const CellChange& c) { return c.worse; }));
}

// --- cells --------------------------------------------------------------------------------------

namespace {
bool bad(Verdict v) {
  return v == Verdict::kMissed || v == Verdict::kFalseAlarm || v == Verdict::kError || v == Verdict::kFail;
}
using CellKey = std::tuple<std::string, std::string, std::string>;
}  // namespace

std::vector<CellChange> diff_cells(const std::vector<Cell>& base, const std::vector<Cell>& next,
                                   int* compared) {
  std::map<CellKey, Verdict> a;
  for (const Cell& c : base) a[{c.check, c.recipe, c.device}] = c.verdict;
  std::set<CellKey> seen;
  std::vector<CellChange> out;
  int n = 0;
  for (const Cell& c : next) {
    CellKey k{c.check, c.recipe, c.device};
    seen.insert(k);
    auto it = a.find(k);
    if (it == a.end()) {
      out.push_back({c.check, c.recipe, c.device, std::nullopt, c.verdict, bad(c.verdict)});
      continue;
    }
    ++n;
    if (it->second == c.verdict) continue;
    out.push_back({c.check, c.recipe, c.device, it->second, c.verdict, !bad(it->second) && bad(c.verdict)});
  }
  for (const Cell& c : base) {
    if (!seen.count({c.check, c.recipe, c.device})) {
      out.push_back({c.check, c.recipe, c.device, c.verdict, std::nullopt, false});
    }
  }
  if (compared) *compared = n;
  return out;
}

// --- benchmarks ----------------------------------------------------------------------------------

BenchChange compare_benchmark(const BenchmarkRecord& base, const BenchmarkRecord& next,
                              const CompareOptions& o) {
  BenchChange b;
  b.name = next.name;
  b.device = next.device;
  b.unit = next.unit;
  b.base_samples = base.samples;
  b.next_samples = next.samples;
  b.base_median = base.samples.empty() ? base.median : stats::median(base.samples);
  b.next_median = next.samples.empty() ? next.median : stats::median(next.samples);
  b.direction = direction_for_unit(next.unit);
  auto th = o.metric_thresholds.find(next.name);
  b.threshold = th != o.metric_thresholds.end() ? th->second : o.threshold;
  if (base.unit != next.unit) {
    b.status = BenchStatus::kUnitChanged;
    b.warnings.push_back("unit changed from '" + base.unit + "' to '" + next.unit + "': not compared");
    return b;
  }
  b.change = b.base_median != 0.0 ? (b.next_median - b.base_median) / b.base_median : 0.0;
  const size_t n1 = base.samples.size(), n2 = next.samples.size();
  const size_t few = static_cast<size_t>(o.warn_below_samples);
  if (n1 < few || n2 < few) {
    std::ostringstream w;
    w << "few samples (" << n1 << " vs " << n2 << "; fewer than " << o.warn_below_samples
      << " per side gives the test little power)";
    b.warnings.push_back(w.str());
  }
  if (n1 < 2 || n2 < 2) {
    b.status = BenchStatus::kUntested;
    b.warnings.push_back("no significance test: a side has fewer than 2 samples");
    return b;
  }
  b.test = stats::mann_whitney_u(base.samples, next.samples);
  const double floor_p = stats::smallest_exact_p(static_cast<int>(n1), static_cast<int>(n2));
  if (b.test->method == stats::MwuMethod::kExact && floor_p >= o.alpha) {
    std::ostringstream w;
    w << "with " << n1 << " vs " << n2 << " samples the smallest possible p is " << floor_p
      << ": no change can be significant at alpha " << o.alpha;
    b.warnings.push_back(w.str());
  }
  b.significant = b.test->p < o.alpha;
  const double worse = b.direction == Direction::kLowerIsBetter ? b.change : -b.change;
  if (b.significant && worse > b.threshold) {
    b.status = BenchStatus::kRegression;
  } else if (b.significant && -worse > b.threshold) {
    b.status = BenchStatus::kImprovement;
  } else {
    b.status = BenchStatus::kUnchanged;
  }
  return b;
}

namespace {

// The row of one counter both records carry (instructions, simulated cache misses): its samples
// compared by compare_benchmark's rule under `unit`, `threshold`. Counts hardly vary: the
// few-samples warning, about time's spread, is left out.
BenchChange counter_row(const BenchmarkRecord& base, const BenchmarkRecord& next, const std::string& counter,
                        const std::string& unit, const CompareOptions& o, double threshold) {
  BenchmarkRecord x = base, y = next;
  for (BenchmarkRecord* r : {&x, &y}) {
    const BenchmarkCounter& k = r->counters.at(counter);
    r->unit = unit;
    r->samples = k.samples;
    r->median = k.median;
  }
  CompareOptions co = o;
  co.threshold = threshold;
  co.metric_thresholds.clear();
  BenchChange ch = compare_benchmark(x, y, co);
  ch.warnings.erase(std::remove_if(ch.warnings.begin(), ch.warnings.end(),
                                   [](const std::string& w) { return w.rfind("few samples", 0) == 0; }),
                    ch.warnings.end());
  return ch;
}

bool both_have(const BenchmarkRecord& a, const BenchmarkRecord& b, const std::string& counter) {
  return a.counters.count(counter) > 0 && b.counters.count(counter) > 0;
}

}  // namespace

Comparison compare_reports(const Report& base, const Report& next, const CompareOptions& o,
                           std::string base_label, std::string next_label) {
  Comparison c;
  c.options = o;
  c.base_label = std::move(base_label);
  c.next_label = std::move(next_label);
  c.environment = diff_environment(base.environment, next.environment);
  c.cells = diff_cells(base.cells, next.cells, &c.cells_compared);
  c.numerics = diff_numerics(base.cells, next.cells, o.numerics_tolerance);
  std::map<std::pair<std::string, std::string>, const BenchmarkRecord*> a;
  for (const BenchmarkRecord& b : base.benchmarks) a[{b.name, b.device}] = &b;
  std::set<std::pair<std::string, std::string>> seen;
  for (const BenchmarkRecord& b : next.benchmarks) {
    seen.insert({b.name, b.device});
    auto it = a.find({b.name, b.device});
    if (it == a.end()) {
      BenchChange ch;
      ch.name = b.name;
      ch.device = b.device;
      ch.unit = b.unit;
      ch.next_samples = b.samples;
      ch.next_median = b.median;
      ch.direction = direction_for_unit(b.unit);
      ch.status = BenchStatus::kAdded;
      c.benchmarks.push_back(std::move(ch));
    } else {
      c.benchmarks.push_back(compare_benchmark(*it->second, b, o));
      // Counted on both sides: the counts' row, which gates; the time row is reported beside it.
      if (both_have(*it->second, b, instructions::kCounter)) {
        BenchChange ch = counter_row(*it->second, b, instructions::kCounter, "instructions", o, o.instruction_threshold);
        ch.instructions = true;
        if (!o.gate_time_too) {
          BenchChange& time_row = c.benchmarks.back();
          time_row.gating = false;
          time_row.warnings.push_back("time reported, not gating: both reports count this benchmark's instructions, "
                                      "which gate (--gate-time: time as well)");
        }
        c.benchmarks.push_back(std::move(ch));
        // Simulated cache misses beside the counts (harness/instructions.h): what instructions
        // cannot see of memory, shown, never gating (they depend on what ran before on the thread).
        for (const auto& m : instructions::kCacheMisses) {
          if (!both_have(*it->second, b, m.counter)) continue;
          BenchChange mc = counter_row(*it->second, b, m.counter, m.unit, o, o.threshold);
          mc.gating = false;
          mc.warnings.push_back("simulated cache misses: reported, not gating");
          c.benchmarks.push_back(std::move(mc));
        }
      }
    }
  }
  for (const BenchmarkRecord& b : base.benchmarks) {
    if (seen.count({b.name, b.device})) continue;
    BenchChange ch;
    ch.name = b.name;
    ch.device = b.device;
    ch.unit = b.unit;
    ch.base_samples = b.samples;
    ch.base_median = b.median;
    ch.direction = direction_for_unit(b.unit);
    ch.status = BenchStatus::kRemoved;
    c.benchmarks.push_back(std::move(ch));
  }
  return c;
}

int exit_code_for(const Comparison& c) {
  return c.regressions() > 0 || c.worse_cells() > 0 || c.numerics_failures() > 0 ? 1 : 0;
}

}  // namespace tc
