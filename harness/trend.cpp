#include "harness/trend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

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
    return s.status == TrendStatus::kRegression;
  }));
}

Trend compute_trend(const std::vector<Report>& runs, const std::vector<std::string>& labels,
                    const TrendOptions& o) {
  Trend t;
  t.labels = labels;
  t.options = o;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const BenchmarkRecord& b : runs[r].benchmarks) {
      auto [it, fresh] = index.try_emplace({b.name, b.device}, t.series.size());
      if (fresh) {
        TrendSeries s;
        s.name = b.name;
        s.device = b.device;
        s.unit = b.unit;
        s.direction = direction_for_unit(b.unit);
        s.medians.assign(runs.size(), NAN);
        t.series.push_back(std::move(s));
      }
      t.series[it->second].medians[r] = b.samples.empty() ? b.median : stats::median(b.samples);
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
      if (bad > o.threshold) ++worse;
      if (-bad > o.threshold) ++better;
    }
    s.status = worse == static_cast<int>(w)    ? TrendStatus::kRegression
               : better == static_cast<int>(w) ? TrendStatus::kImprovement
                                               : TrendStatus::kStable;
  }
  return t;
}

int exit_code_for(const Trend& t) { return t.regressions() > 0 ? 1 : 0; }

}  // namespace tc
