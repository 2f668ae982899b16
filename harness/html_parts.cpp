#include "harness/html_parts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/util/statistics.h"
#include "harness/util/text_format.h"

namespace tc::html {

namespace {
// `&`, `<`, `>` always; the quotes too where the text goes into an attribute.
std::string escaped(const std::string& s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += quotes ? "&quot;" : "\""; break;
      case '\'': out += quotes ? "&#39;" : "'"; break;
      default: out += c;
    }
  }
  return out;
}
}  // namespace

std::string escape(const std::string& s) { return escaped(s, true); }

std::string escape_text(const std::string& s) { return escaped(s, false); }

std::string page_begin(const std::string& title, const std::string& extra_css) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>\n"
         "body{font-family:system-ui,sans-serif;margin:1.5em;color:#202124;max-width:1400px}\n"
         "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}\n"
         "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;"
         "text-align:left;vertical-align:top;font-size:.9em}th{background:#f8f9fa}\n"
         ".ok,.unchanged,.PASS{background:#e6f4ea}.missed,.false_alarm,.error,.regression,.worse,.FAIL{background:#fce8e6}"
         ".skipped,.untested,.added,.removed,.unit_changed{background:#f1f3f4}.improvement{background:#e8f0fe}\n"
         "pre{white-space:pre-wrap;margin:.2em 0;max-width:70em;font-size:.85em}details summary{cursor:pointer}\n"
         ".verdict{font-weight:600}.muted{color:#5f6368}.warn{color:#b06000}\n"
         "svg.chart{background:#fff;border:1px solid #ddd;margin:.3em .6em .3em 0}\n"
         "svg .axis{stroke:#5f6368;stroke-width:1}svg text{font-size:10px;fill:#3c4043}\n"
         "svg .line{fill:none;stroke-width:1.6}svg .s0{stroke:#1a73e8}svg .s1{stroke:#e8710a;stroke-dasharray:5 3}"
         "svg .s2{stroke:#188038}svg .s3{stroke:#a142f4}svg .marker{stroke:#d93025;stroke-width:1.2;stroke-dasharray:3 2}\n"
         "svg .dot{fill:#1a73e8}svg .flag{fill:#d93025}svg .med{stroke:#202124;stroke-width:2}\n"
         ".legend span{margin-right:1em;font-size:.85em}.sw0{color:#1a73e8}.sw1{color:#e8710a}.sw2{color:#188038}.sw3{color:#a142f4}\n" +
         extra_css + "</style></head><body>\n";
}

std::string page_end() { return "</body></html>\n"; }

std::string line_chart(const std::vector<Series>& series, const ChartOptions& o) {
  size_t n = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    n = std::max(n, s.y.size());
    for (double v : s.y) {
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  std::ostringstream h;
  const int W = o.width, H = o.height, L = 56, R = 10, T = 22, B = 30;
  h << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" role=\"img\"><title>" << escape(o.title) << "</title>";
  h << "<text x=\"" << L << "\" y=\"14\">" << escape(o.title) << "</text>";
  if (n == 0 || !std::isfinite(lo)) {
    h << "<text x=\"" << L << "\" y=\"" << H / 2 << "\">no data</text></svg>";
    return h.str();
  }
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double pw = W - L - R, ph = H - T - B;
  auto X = [&](double i) { return L + (n > 1 ? i / (n - 1) : 0.5) * pw; };
  auto Y = [&](double v) { return T + (1.0 - (v - lo) / (hi - lo)) * ph; };
  char buf[64];
  h << "<line class=\"axis\" x1=\"" << L << "\" y1=\"" << T + ph << "\" x2=\"" << L + pw << "\" y2=\"" << T + ph << "\"/>";
  h << "<line class=\"axis\" x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << T + ph << "\"/>";
  h << "<text x=\"2\" y=\"" << T + 8 << "\">" << num(hi) << "</text>";
  h << "<text x=\"2\" y=\"" << T + ph << "\">" << num(lo) << "</text>";
  h << "<text x=\"2\" y=\"" << T + ph / 2 << "\">" << escape(o.y_label) << "</text>";
  const std::string x0 = o.x_ticks.empty() ? "0" : o.x_ticks.front();
  const std::string x1 = o.x_ticks.empty() ? std::to_string(n - 1) : o.x_ticks.back();
  h << "<text x=\"" << L << "\" y=\"" << H - 16 << "\">" << escape(x0) << "</text>";
  h << "<text x=\"" << L + pw << "\" y=\"" << H - 16 << "\" text-anchor=\"end\">" << escape(x1) << "</text>";
  h << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 4 << "\" text-anchor=\"middle\">" << escape(o.x_label) << "</text>";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    h << "<polyline class=\"line " << (s.css_class.empty() ? std::string("s").append(std::to_string(k % 4)) : s.css_class)
      << "\" points=\"";
    for (size_t i = 0; i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", X(static_cast<double>(i)), Y(s.y[i]));
      h << buf;
    }
    h << "\"><title>" << escape(s.label) << "</title></polyline>";
    if (o.dots && s.y.size() <= 60) {
      for (size_t i = 0; i < s.y.size(); ++i) {
        if (!std::isfinite(s.y[i])) continue;
        std::snprintf(buf, sizeof buf, "%.1f", X(static_cast<double>(i)));
        h << "<circle class=\"dot\" r=\"1.8\" cx=\"" << buf << "\" cy=\"";
        std::snprintf(buf, sizeof buf, "%.1f", Y(s.y[i]));
        h << buf << "\"><title>" << escape(s.label) << " [" << i << "] = " << num(s.y[i]) << "</title></circle>";
      }
    }
  }
  if (o.marker_x) {
    std::snprintf(buf, sizeof buf, "%.1f", X(*o.marker_x));
    h << "<line class=\"marker\" x1=\"" << buf << "\" y1=\"" << T << "\" x2=\"" << buf << "\" y2=\"" << T + ph
      << "\"/><text x=\"" << buf << "\" dx=\"3\" y=\"" << T + 10 << "\" fill=\"#d93025\">" << escape(o.marker_label)
      << "</text>";
  }
  h << "</svg>";
  return h.str();
}

std::string strip_plot(const std::vector<double>& samples, double lo, double hi, int width) {
  std::ostringstream h;
  const int H = 18;
  h << "<svg class=\"strip\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << H << "\">";
  if (samples.empty() || !(hi > lo)) {
    if (!samples.empty()) {
      h << "<line class=\"med\" x1=\"" << width / 2 << "\" y1=\"2\" x2=\"" << width / 2 << "\" y2=\"16\"/>";
    }
    h << "</svg>";
    return h.str();
  }
  char buf[32];
  auto X = [&](double v) { return 4 + (v - lo) / (hi - lo) * (width - 8); };
  h << "<line class=\"axis\" x1=\"4\" y1=\"9\" x2=\"" << width - 4 << "\" y2=\"9\"/>";
  for (double v : samples) {
    std::snprintf(buf, sizeof buf, "%.1f", X(v));
    h << "<circle class=\"dot\" r=\"2.5\" cy=\"9\" cx=\"" << buf << "\"><title>" << num(v) << "</title></circle>";
  }
  std::snprintf(buf, sizeof buf, "%.1f", X(stats::median(samples)));
  h << "<line class=\"med\" x1=\"" << buf << "\" y1=\"2\" x2=\"" << buf << "\" y2=\"16\"/></svg>";
  return h.str();
}

}  // namespace tc::html
