#include "harness/compare_html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/compare_text.h"
#include "harness/html_parts.h"
#include "harness/util/text_format.h"

namespace tc {

using html::escape;
using html::num;

namespace {
using fmt::signed_pct;
}  // namespace

void environment_section(std::ostringstream& h, const std::vector<EnvChange>& changes) {
  h << "<h2>Environment</h2>\n";
  if (changes.empty()) {
    h << "<p id=\"environment\">identical</p>\n";
  } else {
    h << "<table id=\"environment\"><thead><tr><th>key</th><th>base</th><th>new</th></tr></thead><tbody>\n";
    for (const EnvChange& e : changes) {
      h << "<tr><td>" << escape(e.key) << "</td><td>" << escape(e.base) << "</td><td>" << escape(e.next)
        << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
}

namespace {

void verdicts_section(std::ostringstream& h, const Comparison& c) {
  h << "<h2>Verdicts</h2>\n<p>" << c.cells_compared << " cell(s) in both reports, " << c.cells.size()
    << " change(s).</p>\n";
  if (!c.cells.empty()) {
    h << "<table id=\"cells\"><thead><tr><th>check</th><th>recipe</th><th>device</th><th>base</th><th>new</th>"
         "</tr></thead><tbody>\n";
    for (const CellChange& ch : c.cells) {
      h << "<tr class=\"" << (ch.worse ? "worse" : "changed") << "\" data-check=\"" << escape(ch.check)
        << "\" data-recipe=\"" << escape(ch.recipe) << "\" data-device=\"" << escape(ch.device) << "\"><td>"
        << escape(ch.check) << "</td><td>" << escape(ch.recipe) << "</td><td>" << escape(ch.device) << "</td><td>"
        << (ch.base ? to_string(*ch.base) : "(absent)") << "</td><td>" << (ch.next ? to_string(*ch.next) : "(absent)")
        << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
}

void numerics_section(std::ostringstream& h, const Comparison& c) {
  h << "<h2>Numerics</h2>\n<p class=\"muted\">" << escape(numerics_rule(c.options)) << ".</p>\n";
  if (c.numerics.empty()) {
    h << "<p id=\"numerics\">no training fingerprint in either report</p>\n";
  } else {
    h << "<table id=\"numerics\"><thead><tr><th>check</th><th>recipe</th><th>device</th><th>status</th>"
         "<th>largest relative difference</th><th>first step beyond float rounding</th><th>details</th>"
         "</tr></thead><tbody>\n";
    for (const NumericsChange& n : c.numerics) {
      const bool compared = n.status == NumericsStatus::kDrifted || n.status == NumericsStatus::kDiverged;
      h << "<tr class=\"numerics " << to_string(n.status) << (numerics_fails(n, c.options.numerics) ? " worse" : "")
        << "\" data-check=\"" << escape(n.check) << "\" data-recipe=\"" << escape(n.recipe) << "\" data-device=\""
        << escape(n.device) << "\" data-status=\"" << to_string(n.status) << "\"><td>" << escape(n.check)
        << "</td><td>" << escape(n.recipe) << "</td><td>" << escape(n.device) << "</td><td class=\"verdict\">"
        << to_string(n.status) << (n.variant ? " (variant, not gating)" : "") << "</td><td>"
        << (compared ? num(n.max_rel_diff) + " (" + escape(n.max_rel_where) + ")" : "-") << "</td><td>"
        << (compared && n.first_beyond_rounding ? std::to_string(*n.first_beyond_rounding) : "-") << "</td><td>"
        << escape(describe_numerics(n)) << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
}

void benchmarks_section(std::ostringstream& h, const Comparison& c) {
  h << "<h2>Benchmarks</h2>\n";
  if (c.benchmarks.empty()) h << "<p>none</p>\n";
  else {
    h << "<table id=\"benchmarks\"><thead><tr><th>name</th><th>device</th><th>unit</th><th>n</th><th>base median</th>"
         "<th>new median</th><th>change</th><th>threshold</th><th>p</th><th>test</th><th>samples (base above, new "
         "below; bar = median)</th><th>status</th></tr></thead><tbody>\n";
    for (const BenchChange& b : c.benchmarks) {
      double lo = INFINITY, hi = -INFINITY;
      for (double v : b.base_samples) lo = std::min(lo, v), hi = std::max(hi, v);
      for (double v : b.next_samples) lo = std::min(lo, v), hi = std::max(hi, v);
      const bool both = b.status != BenchStatus::kAdded && b.status != BenchStatus::kRemoved &&
                        b.status != BenchStatus::kUnitChanged;
      h << "<tr class=\"bench " << to_string(b.status) << "\" data-name=\"" << escape(b.name) << "\" data-device=\""
        << escape(b.device) << "\"><td>" << escape(b.name) << "</td><td>" << escape(b.device) << "</td><td>"
        << escape(b.unit) << "</td><td style=\"white-space:nowrap\">" << b.base_samples.size() << "/" << b.next_samples.size() << "</td><td>"
        << (b.status == BenchStatus::kAdded ? "-" : num(b.base_median)) << "</td><td>"
        << (b.status == BenchStatus::kRemoved ? "-" : num(b.next_median)) << "</td><td>"
        << (both ? signed_pct(b.change) : "-") << "</td><td>" << signed_pct(b.threshold).substr(1) << "</td><td>"
        << (b.test ? num(b.test->p) : "-") << "</td><td>" << (b.test ? stats::to_string(b.test->method) : "-")
        << "</td><td>" << html::strip_plot(b.base_samples, lo, hi) << "<br>" << html::strip_plot(b.next_samples, lo, hi)
        << "</td><td class=\"verdict\">" << to_string(b.status);
      for (const std::string& w : b.warnings) h << "<div class=\"warn\">" << escape(w) << "</div>";
      h << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
}

}  // namespace

std::string render_compare_html(const Comparison& c) {
  std::ostringstream h;
  const bool fail = exit_code_for(c) != 0;
  h << html::page_begin("torchconform compare");
  h << "<h1>torchconform compare</h1>\n<p>base <code>" << escape(c.base_label) << "</code> &rarr; new <code>"
    << escape(c.next_label) << "</code></p>\n";
  h << "<p id=\"gate\" class=\"verdict " << (fail ? "FAIL" : "PASS") << "\">" << escape(gate_line(c)) << "</p>\n";
  h << "<p class=\"muted\">A benchmark regressed when the two-sided Mann-Whitney U test gives p &lt; "
    << num(c.options.alpha) << " and its median moved in the worse direction by more than its threshold ("
    << signed_pct(c.options.threshold).substr(1) << " unless set per metric). Units ending in /s are throughputs "
    << "(smaller is worse); other units are time-like (larger is worse).</p>\n";

  environment_section(h, c.environment);
  verdicts_section(h, c);
  numerics_section(h, c);
  benchmarks_section(h, c);
  h << html::page_end();
  return h.str();
}

}  // namespace tc
