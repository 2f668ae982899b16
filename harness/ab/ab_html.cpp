#include <cstdio>
#include <sstream>

#include "harness/ab/ab_report.h"
#include "harness/compare_html.h"
#include "harness/html_parts.h"
#include "harness/util/statistics.h"
#include "harness/util/text_format.h"

namespace tc {

using html::escape;
using html::num;

namespace {

using fmt::pct;
using fmt::ratio;

// The ratios by round against the threshold band, the median and its interval.
std::string ratio_chart(const AbBench& b, double level) {
  html::ChartOptions o;
  o.title = b.name + " [" + b.device + "]: NEW/BASE by round";
  o.x_label = "paired round";
  o.y_label = "ratio";
  o.width = 640;
  const size_t n = b.ratios.size();
  std::vector<html::Series> s{{"ratio NEW/BASE", b.ratios, "s0"},
                              {"1 + threshold", std::vector<double>(n, 1.0 + b.threshold), "s1"},
                              {"1 - threshold", std::vector<double>(n, 1.0 - b.threshold), "s1"},
                              {"median ratio", std::vector<double>(n, b.ratio.median), "s2"}};
  if (b.ratio.has_interval) {
    s.push_back({pct(level) + " interval, low end", std::vector<double>(n, b.ratio.lo), "s3"});
    s.push_back({pct(level) + " interval, high end", std::vector<double>(n, b.ratio.hi), "s3"});
  }
  return html::line_chart(s, o);
}

}  // namespace

namespace {

void benchmarks_table(std::ostringstream& h, const AbResult& r) {
  h << "<h2>Benchmarks</h2>\n";
  if (r.benchmarks.empty()) h << "<p>none</p>\n";
  else {
    h << "<table id=\"benchmarks\"><thead><tr><th>name</th><th>device</th><th>unit</th><th>pairs</th>"
         "<th>base median</th><th>new median</th><th>median ratio</th><th>interval</th><th>threshold</th>"
         "<th>status</th></tr></thead><tbody>\n";
    for (const AbBench& b : r.benchmarks) {
      const bool paired = !b.ratios.empty();
      h << "<tr class=\"bench " << to_string(b.status) << "\" data-name=\"" << escape(b.name) << "\" data-device=\""
        << escape(b.device) << "\"><td>" << escape(b.name) << "</td><td>" << escape(b.device) << "</td><td>"
        << escape(b.unit) << "</td><td>" << b.ratios.size() << "</td><td>"
        << (paired ? num(stats::median(b.base)) : "-") << "</td><td>" << (paired ? num(stats::median(b.next)) : "-")
        << "</td><td>" << (paired ? ratio(b.ratio.median) : "-") << "</td><td>"
        << (b.ratio.has_interval ? std::string("[").append(ratio(b.ratio.lo)).append(", ").append(ratio(b.ratio.hi)).append("]") : "-") << "</td><td>"
        << pct(b.threshold) << "</td><td class=\"verdict\">" << to_string(b.status);
      if (!b.note.empty()) h << "<div class=\"warn\">" << escape(b.note) << "</div>";
      h << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
}

// Per benchmark: its ratio chart and the table of its rounds.
void series_section(std::ostringstream& h, const AbResult& r) {
  for (const AbBench& b : r.benchmarks) {
    if (b.ratios.empty()) continue;
    h << "<div class=\"series " << to_string(b.status) << "\" data-name=\"" << escape(b.name) << "\" data-device=\""
      << escape(b.device) << "\" data-status=\"" << to_string(b.status) << "\">\n<h3>" << escape(b.name) << " ["
      << escape(b.device) << "]: " << to_string(b.status) << "</h3>\n"
      << ratio_chart(b, r.options.level)
      << "\n<div class=\"legend\"><span class=\"sw0\">&#9644; ratio by round</span><span class=\"sw1\">&#9644; "
         "1 &plusmn; threshold</span><span class=\"sw2\">&#9644; median ratio</span><span class=\"sw3\">&#9644; "
         "its interval</span></div>\n";
    h << "<table class=\"rounds\"><thead><tr><th>round</th><th>order</th><th>load (1 min)</th><th>base ("
      << escape(b.unit) << ")</th><th>new (" << escape(b.unit) << ")</th><th>ratio</th></tr></thead><tbody>\n";
    for (size_t i = 0; i < b.ratios.size(); ++i) {
      const AbRoundInfo& info = r.round_info[static_cast<size_t>(b.rounds[i])];
      h << "<tr><td>" << b.rounds[i] + 1 << "</td><td>" << (info.base_first ? "base, new" : "new, base")
        << "</td><td>" << (info.load1 >= 0 ? num(info.load1) : "-") << "</td><td>" << num(b.base[i]) << "</td><td>"
        << num(b.next[i]) << "</td><td>" << ratio(b.ratios[i]) << "</td></tr>\n";
    }
    h << "</tbody></table></div>\n";
  }
}

}  // namespace

std::string render_ab_html(const AbRunInfo& run, const AbResult& r) {
  std::ostringstream h;
  const bool fail = exit_code_for(r) != 0;
  h << html::page_begin("torchconform ab", ".inconclusive{background:#fef7e0}.base_only,.new_only{background:#f1f3f4}\n");
  h << "<h1>torchconform ab</h1>\n<p>base <code>" << escape(run.base_arg) << "</code>";
  if (!run.base_env.empty()) h << " with <code>" << escape(ab_env_text(run.base_env)) << "</code>";
  h << " &rarr; new <code>" << escape(run.next_arg) << "</code>";
  if (!run.next_env.empty()) h << " with <code>" << escape(ab_env_text(run.next_env)) << "</code>";
  h << "</p>\n<p id=\"gate\" class=\"verdict " << (fail ? "FAIL" : "PASS") << "\">" << escape(ab_gate_line(r))
    << "</p>\n";
  h << "<p class=\"muted\">" << r.rounds << " round(s) of " << run.planned_rounds
    << (run.stopped_by_budget ? " (time budget spent)" : "") << ", order seed " << run.seed << ", " << num(run.wall_s)
    << " s. Pairing " << escape(run.pairing) << ": each round is " << escape(ab_round_description(run))
    << ", in a random order; a round's ratio is NEW's " << (run.pairing == "run" ? "median" : "time")
    << " over BASE's ("
    << (r.options.instructions ? "instructions per iteration, counted under valgrind"
        : r.options.cpu_time   ? "CPU time"
                               : "real time")
    << "). A benchmark "
       "regressed when the "
    << pct(r.options.level) << " distribution-free interval of the median ratio lies wholly beyond its threshold ("
    << pct(r.options.threshold) << " unless set per benchmark) in the worse direction (larger for time-like units, "
       "smaller for units ending in /s); unchanged when the interval lies within the threshold band; inconclusive "
       "otherwise ("
    << (r.options.strict ? "fails the gate: strict" : "passes the gate") << ").</p>\n";

  environment_section(h, run.environment);
  benchmarks_table(h, r);
  series_section(h, r);
  h << html::page_end();
  return h.str();
}

}  // namespace tc
