#include "harness/trend_text.h"

#include <sstream>

#include "harness/util/text_format.h"

namespace tc {

std::string render_trend_text(const Trend& t) {
  std::ostringstream s;
  s << "torchconform trend: " << t.labels.size() << " run(s), " << t.series.size()
    << " benchmark(s); step change = last " << t.options.window << " medians all beyond "
    << t.options.threshold * 100 << "% of the median of the earlier runs\n";
  for (const TrendSeries& ts : t.series) {
    s << "  " << ts.name << " [" << ts.device << ", " << ts.unit << "]: " << to_string(ts.status);
    if (ts.status != TrendStatus::kShortHistory) {
      s << " (reference " << fmt::num(ts.reference) << ", last:";
      for (double c : ts.recent_changes) s << " " << fmt::signed_pct(c);
      s << ")";
    } else {
      s << " (needs " << t.options.window + 2 << " runs with it)";
    }
    if (ts.instructions) s << " [threshold " << t.options.instruction_threshold * 100 << "%]";
    if (!ts.gating) s << " [not gating: its instruction counts gate]";
    s << '\n';
  }
  s << "trend gate: " << (exit_code_for(t) ? "FAIL" : "PASS") << " (" << t.regressions()
    << " persistent regression(s))\n";
  return s.str();
}

}  // namespace tc
