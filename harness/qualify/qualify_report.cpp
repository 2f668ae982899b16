// The reporters of `torchconform qualify`: console table, JSON, self-contained HTML. Format only:
// the assessment is made before (harness/qualify/assess.h).
#include <iomanip>
#include <sstream>

#include "harness/html_parts.h"
#include "harness/qualify/qualify.h"
#include "harness/util/text_format.h"

namespace tc::qualify {
namespace {

using nlohmann::json;

using fmt::num;  // 4 significant digits

using fmt::pct;  // 1 decimal: "5.0%"

std::string bounds_text(const Bounds& b) {
  return "max(" + num(b.k) + " x 1.4826 x MAD, " + pct(b.floor) + ") of the other ranks' median";
}

// The flags of one rank, joined.
std::vector<std::string> flags_of(const Report& r, int rank) {
  std::vector<std::string> out;
  for (const Flag& f : r.assessment.flags) {
    if (f.rank == rank) out.push_back(f.what);
  }
  return out;
}

}  // namespace

std::string render_text(const Report& r) {
  std::ostringstream os;
  const Assessment& j = r.assessment;
  os << "qualify: " << r.ranks.size() << " rank(s); a figure is flagged when it is below the other ranks' median "
     << "by more than " << bounds_text(r.bounds) << "\n\n";
  // One row per rank: identity, each figure's median (its deviation), fingerprint.
  os << std::left << std::setw(5) << "rank" << std::setw(14) << "host" << std::setw(8) << "device";
  for (const FigureVerdict& f : j.figures) os << std::setw(24) << (f.figure + " " + f.unit);
  os << "fingerprint\n";
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankResult& rk = r.ranks[i];
    os << std::setw(5) << rk.rank << std::setw(14) << rk.host.substr(0, 13) << std::setw(8) << rk.device;
    for (const FigureVerdict& f : j.figures) {
      std::string cell = "-";
      if (i < f.per_rank.size()) {
        const Deviation& d = f.per_rank[i];
        cell = num(d.value) + " (" + (d.relative >= 0 ? "+" : "") + pct(d.relative) + ")" + (d.flagged ? " !" : "");
      }
      os << std::setw(24) << cell;
    }
    const bool differs = i < j.fingerprint.differs.size() && j.fingerprint.differs[i];
    os << rk.fingerprint.params_sha256().substr(0, 12) << (differs ? " !" : "") << "\n";
  }
  os << "\n";
  for (const RankResult& rk : r.ranks) {
    os << "rank " << rk.rank << ": " << rk.host << ", " << rk.device << ", " << rk.device_id << "\n";
    for (const std::string& n : rk.notes) os << "  note: " << n << "\n";
  }
  if (!r.ranks.empty()) {
    os << "\nprobes:\n";
    for (const Figure& f : r.ranks.front().figures) os << "  " << f.name << ": " << f.detail << "\n";
  }
  if (r.ranks.size() < 2) os << "\nonly one rank: nothing to compare it with\n";
  os << "\n";
  if (j.flags.empty()) {
    os << "qualify: PASS, no device flagged\n";
  } else {
    os << "qualify: FAIL, " << j.flags.size() << " flag(s):\n";
    for (const Flag& f : j.flags) {
      const RankResult* rk = nullptr;
      for (const RankResult& x : r.ranks) rk = x.rank == f.rank ? &x : rk;
      os << "  FLAGGED rank " << f.rank;
      if (rk) os << " (" << rk->host << ", " << rk->device << ", " << rk->device_id << ")";
      os << ": " << f.what << "\n";
    }
  }
  return os.str();
}

json report_json(const Report& r) {
  json out = r.header.is_object() ? r.header : json::object();
  out["schema"] = "torchconform.qualify/2";
  out["bounds"] = {{"k", r.bounds.k}, {"mad_scale", 1.4826}, {"floor", r.bounds.floor},
                   {"rule", "flagged when value < centre - max(k * mad_scale * mad, floor * centre), centre and "
                            "mad over the other ranks"}};
  json ranks = json::array();
  for (const RankResult& rk : r.ranks) ranks.push_back(to_json(rk));
  out["ranks"] = ranks;
  json figures = json::array();
  for (const FigureVerdict& f : r.assessment.figures) {
    json per = json::array();
    for (size_t i = 0; i < f.per_rank.size(); ++i) {
      const Deviation& d = f.per_rank[i];
      per.push_back({{"value", d.value}, {"centre", d.centre}, {"mad", d.mad}, {"bound", d.bound},
                     {"relative", d.relative}, {"flagged", d.flagged}});
    }
    figures.push_back({{"name", f.figure}, {"unit", f.unit}, {"per_rank", per}});
  }
  out["figures"] = figures;
  json differs = json::array();
  for (bool d : r.assessment.fingerprint.differs) differs.push_back(d);
  out["fingerprint"] = {{"majority", r.assessment.fingerprint.majority_digest.empty()
                                         ? json(nullptr) : json(r.assessment.fingerprint.majority_digest)},
                        {"majority_count", r.assessment.fingerprint.majority_count},
                        {"differs", differs}};
  json flags = json::array();
  for (const Flag& f : r.assessment.flags) flags.push_back({{"rank", f.rank}, {"what", f.what}});
  out["flags"] = flags;
  out["summary"] = {{"ranks", r.ranks.size()}, {"flags", r.assessment.flags.size()}, {"exit_code", r.exit_code()}};
  return out;
}

std::string render_html(const Report& r) {
  std::ostringstream h;
  const Assessment& j = r.assessment;
  const bool pass = j.flags.empty();
  h << html::page_begin("torchconform qualify", "td.flagged{background:#fdd;font-weight:bold}");
  h << "<h1>torchconform qualify</h1>\n<p id=\"gate\" class=\"verdict " << (pass ? "PASS" : "FAIL") << "\">qualify: "
    << (pass ? "PASS, no device flagged" : "FAIL, " + std::to_string(j.flags.size()) + " flag(s)") << "</p>\n";
  h << "<p class=\"muted\">" << r.ranks.size() << " rank(s). A figure (the median of its repetitions) is flagged when "
    << "it is below the other ranks' median by more than " << html::escape(bounds_text(r.bounds))
    << "; a training fingerprint when it differs from the majority's.</p>\n";
  h << "<table id=\"ranks\"><tr><th>rank</th><th>host</th><th>device</th><th>identity</th>";
  for (const FigureVerdict& f : j.figures) h << "<th>" << html::escape(f.figure + " (" + f.unit + ")") << "</th>";
  h << "<th>fingerprint</th><th>notes</th></tr>\n";
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankResult& rk = r.ranks[i];
    const bool flagged = !flags_of(r, rk.rank).empty();
    h << "<tr data-rank=\"" << rk.rank << "\" data-flagged=\"" << (flagged ? "true" : "false") << "\"><td>" << rk.rank
      << "</td><td>" << html::escape_text(rk.host) << "</td><td>" << html::escape_text(rk.device) << "</td><td>"
      << html::escape_text(rk.device_id) << "</td>";
    for (const FigureVerdict& f : j.figures) {
      if (i >= f.per_rank.size()) {
        h << "<td>-</td>";
        continue;
      }
      const Deviation& d = f.per_rank[i];
      const Figure* fig = nullptr;
      for (const Figure& x : rk.figures) fig = x.name == f.figure ? &x : fig;
      h << "<td" << (d.flagged ? " class=\"flagged\"" : "") << ">" << num(d.value) << " ("
        << (d.relative >= 0 ? "+" : "") << pct(d.relative) << ")";
      if (fig && !fig->samples.empty()) {
        double lo = fig->samples.front(), hi = lo;
        for (double s : fig->samples) lo = std::min(lo, s), hi = std::max(hi, s);
        h << "<br>" << html::strip_plot(fig->samples, lo, hi, 120);
      }
      h << "</td>";
    }
    const bool differs = i < j.fingerprint.differs.size() && j.fingerprint.differs[i];
    h << "<td" << (differs ? " class=\"flagged\"" : "") << "><code>" << html::escape_text(rk.fingerprint.params_sha256().substr(0, 16))
      << "</code></td><td>";
    for (const std::string& n : rk.notes) h << html::escape_text(n) << "<br>";
    h << "</td></tr>\n";
  }
  h << "</table>\n";
  if (!j.flags.empty()) {
    h << "<h2>Flagged</h2>\n<ul id=\"flags\">";
    for (const Flag& f : j.flags) h << "<li data-rank=\"" << f.rank << "\">rank " << f.rank << ": " << html::escape_text(f.what) << "</li>";
    h << "</ul>\n";
  }
  if (!r.ranks.empty()) {
    h << "<h2>Probes</h2>\n<ul>";
    for (const Figure& f : r.ranks.front().figures) {
      h << "<li><b>" << html::escape_text(f.name) << "</b>: " << html::escape_text(f.detail) << "</li>";
    }
    h << "</ul>\n";
  }
  h << html::page_end();
  return h.str();
}

}  // namespace tc::qualify
