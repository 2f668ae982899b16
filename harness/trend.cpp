#include "harness/trend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include "harness/util/statistics.h"

namespace tc {

const char* to_string(TrendStatus s) {
  switch (s) {
    case TrendStatus::kStable: return "stable";
    case TrendStatus::kRegression: return "regression";
    case TrendStatus::kImprovement: return "improvement";
    case TrendStatus::kShortHistory: return "short_history";
  }
  return "?";
}

int Trend::regressions() const {
  return static_cast<int>(std::count_if(series.begin(), series.end(), [](const TrendSeries& s) {
    return s.status == TrendStatus::kRegression && s.gating;
  }));
}

Trend compute_trend(const std::vector<Report>& runs, const std::vector<std::string>& labels,
                    const TrendOptions& o) {
  Trend t;
  t.labels = labels;
  t.options = o;
  // (name, device, instructions?) -> series
  std::map<std::tuple<std::string, std::string, bool>, size_t> index;
  auto series_of = [&](const BenchmarkRecord& b, bool counted) -> TrendSeries& {
    auto [it, fresh] = index.try_emplace({b.name, b.device, counted}, t.series.size());
    if (fresh) {
      TrendSeries s;
      s.name = b.name;
      s.device = b.device;
      s.unit = counted ? "instructions" : b.unit;
      s.direction = counted ? Direction::kLowerIsBetter : direction_for_unit(b.unit);
      s.instructions = counted;
      s.medians.assign(runs.size(), NAN);
      t.series.push_back(std::move(s));
    }
    return t.series[it->second];
  };
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const BenchmarkRecord& b : runs[r].benchmarks) {
      series_of(b, false).medians[r] = b.samples.empty() ? b.median : stats::median(b.samples);
      auto c = b.counters.find("instructions");
      if (c != b.counters.end() && !c->second.samples.empty()) series_of(b, true).medians[r] = stats::median(c->second.samples);
    }
  }
  const size_t w = static_cast<size_t>(std::max(1, o.window));
  for (TrendSeries& s : t.series) {
    std::vector<double> present;
    for (double m : s.medians) if (std::isfinite(m)) present.push_back(m);
    if (present.size() < w + 2) continue;  // kShortHistory
    std::vector<double> earlier(present.begin(), present.end() - static_cast<long>(w));
    s.reference = stats::median(earlier);
    int worse = 0, better = 0;
    for (size_t i = present.size() - w; i < present.size(); ++i) {
      const double ch = s.reference != 0.0 ? (present[i] - s.reference) / s.reference : 0.0;
      s.recent_changes.push_back(ch);
      const double bad = s.direction == Direction::kLowerIsBetter ? ch : -ch;
      const double threshold = s.instructions ? o.instruction_threshold : o.threshold;
      if (bad > threshold) ++worse;
      if (-bad > threshold) ++better;
    }
    s.status = worse == static_cast<int>(w)    ? TrendStatus::kRegression
               : better == static_cast<int>(w) ? TrendStatus::kImprovement
                                               : TrendStatus::kStable;
  }
  // A judged instruction series gates in place of its benchmark's time series.
  if (!o.gate_time_too) {
    for (const TrendSeries& c : t.series) {
      if (!c.instructions || c.status == TrendStatus::kShortHistory) continue;
      for (TrendSeries& s : t.series) {
        if (!s.instructions && s.name == c.name && s.device == c.device) s.gating = false;
      }
    }
  }
  return t;
}

int exit_code_for(const Trend& t) { return t.regressions() > 0 ? 1 : 0; }

}  // namespace tc
