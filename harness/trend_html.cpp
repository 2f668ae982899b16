#include "harness/trend_html.h"

#include <sstream>

#include "harness/html_parts.h"

namespace tc {

std::string render_trend_html(const Trend& t) {
  std::ostringstream h;
  h << html::page_begin("torchconform trend");
  h << "<h1>torchconform trend</h1>\n<p id=\"gate\" class=\"verdict " << (exit_code_for(t) ? "FAIL" : "PASS")
    << "\">trend gate: " << (exit_code_for(t) ? "FAIL" : "PASS") << " (" << t.regressions()
    << " persistent regression(s))</p>\n<p class=\"muted\">" << t.labels.size() << " runs, oldest first. A step "
    << "change is flagged when the last " << t.options.window << " medians all differ from the median of the earlier "
    << "runs by more than " << html::num(t.options.threshold * 100) << "% in the same direction (larger is worse for "
    << "time-like units, smaller for units ending in /s).</p>\n";
  h << "<ol class=\"muted\">";
  for (const std::string& l : t.labels) h << "<li>" << html::escape(l) << "</li>";
  h << "</ol>\n";
  for (const TrendSeries& s : t.series) {
    html::ChartOptions o;
    o.title = s.name + " [" + s.device + "] median, " + s.unit;
    o.x_label = "run";
    o.y_label = s.unit;
    o.width = 640;
    o.x_ticks = t.labels;
    if (s.status == TrendStatus::kRegression || s.status == TrendStatus::kImprovement) {
      o.marker_x = static_cast<double>(t.labels.size() - static_cast<size_t>(t.options.window));
      o.marker_label = std::string(to_string(s.status)) + " from here";
    }
    h << "<div class=\"series " << to_string(s.status) << "\" data-name=\"" << html::escape(s.name)
      << "\" data-device=\"" << html::escape(s.device) << "\" data-status=\"" << to_string(s.status) << "\">"
      << html::line_chart({{s.name, s.medians, "s0"}}, o) << "<div>" << to_string(s.status);
    if (s.status != TrendStatus::kShortHistory) h << ", reference median " << html::num(s.reference);
    h << "</div></div>\n";
  }
  h << html::page_end();
  return h.str();
}

}  // namespace tc
