#include "harness/html_writer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "harness/html_parts.h"

namespace tc {
namespace {

using html::escape;
using html::num;
using nlohmann::json;

std::string field(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "n/a";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

const json& sub(const json& j, const char* key) {
  static const json empty = json::object();
  return j.is_object() && j.contains(key) && j[key].is_object() ? j[key] : empty;
}

std::vector<double> curve(const json& metrics, const char* key) {
  std::vector<double> v;
  if (!metrics.contains(key) || !metrics[key].is_array()) return v;
  for (const json& x : metrics[key]) v.push_back(x.is_number() ? x.get<double>() : NAN);
  return v;
}

// The loss curves a check compared, overlaid, first divergence marked; empty if none.
std::string loss_chart(const Cell& c) {
  static const std::pair<const char*, const char*> kPairs[] = {{"loss_curve_a", "loss_curve_b"},
                                                               {"loss_curve_straight", "loss_curve_resumed"}};
  for (const auto& [ka, kb] : kPairs) {
    std::vector<double> a = curve(c.metrics, ka), b = curve(c.metrics, kb);
    if (a.empty() && b.empty()) continue;
    html::ChartOptions o;
    o.dots = false;  // the values are in the cell's metrics, one click away
    o.title = c.check + " / " + c.recipe + " / " + c.device + ": loss per step";
    o.y_label = "loss";
    const json& fd = c.metrics.contains("first_divergence_step") ? c.metrics["first_divergence_step"] : json();
    if (fd.is_number()) {
      o.marker_x = fd.get<double>();
      o.marker_label = "first divergence: step " + fd.dump();
    }
    std::string legend = "<div class=\"legend\"><span class=\"sw0\">&#9644; " + escape(ka) +
                         "</span><span class=\"sw1\">&#9644; " + escape(kb) + "</span>" +
                         (fd.is_number() ? "<span class=\"warn\">first divergence at step " + fd.dump() + "</span>"
                                         : "<span class=\"muted\">curves identical</span>") +
                         "</div>";
    return "<div class=\"losses\">" + html::line_chart({{ka, a, "s0"}, {kb, b, "s1"}}, o) + legend + "</div>";
  }
  return "";
}

void environment_section(std::ostringstream& h, const json& env) {
  const json& gpu = sub(env, "gpu");
  const json& cpu = sub(env, "cpu");
  std::string gpus;
  if (gpu.contains("devices") && gpu["devices"].is_array()) {
    for (const json& d : gpu["devices"]) gpus += (gpus.empty() ? "" : ", ") + field(d, "name");
  }
  std::string flags = "n/a";
  if (cpu.contains("flags") && cpu["flags"].is_array()) flags = std::to_string(cpu["flags"].size()) + " flags";
  const json& fl = sub(env, "flags");
  std::string det;
  for (auto it = fl.begin(); it != fl.end(); ++it) det += it.key() + "=" + it.value().dump() + " ";
  const std::pair<std::string, std::string> rows[] = {
      {"LibTorch", field(sub(env, "libtorch"), "version")},
      {"CUDA runtime / driver", field(gpu, "cuda_runtime") + " / " + field(gpu, "cuda_driver")},
      {"cuDNN / NCCL", field(gpu, "cudnn") + " / " + field(gpu, "nccl")},
      {"GPUs", gpus.empty() ? "none" : gpus},
      {"CPU", field(cpu, "model") + " (" + field(cpu, "logical_cores") + " logical cores, " + flags + ")"},
      {"OS", field(sub(env, "os"), "name") + " " + field(sub(env, "os"), "kernel") + " " + field(sub(env, "os"), "arch")},
      {"build", field(sub(env, "build"), "compiler") + ", " + field(sub(env, "build"), "build_type")},
      {"flags", det.empty() ? "n/a" : det}};
  h << "<h2>Environment</h2>\n<table id=\"environment-summary\"><tbody>\n";
  for (const auto& [k, v] : rows) h << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
  h << "</tbody></table>\n<details><summary>full environment (JSON)</summary><pre id=\"environment\">"
    << escape(env.dump(2)) << "</pre></details>\n";
}

// The promises a check judged (metrics.promises: id, status, evidence), one line each; empty if none.
std::string promises_list(const Cell& c) {
  if (!c.metrics.is_object() || !c.metrics.contains("promises") || !c.metrics["promises"].is_array()) return "";
  std::ostringstream h;
  h << "<ul class=\"promises\">";
  for (const auto& p : c.metrics["promises"]) {
    const std::string status = p.is_object() ? field(p, "status") : "";
    h << "<li class=\"promise " << escape(status) << "\" data-promise=\"" << escape(p.is_object() ? field(p, "id") : "")
      << "\"><b>" << escape(status) << "</b> " << escape(p.is_object() ? field(p, "id") : "") << ": "
      << escape(p.is_object() ? field(p, "evidence") : "") << "</li>";
  }
  h << "</ul>";
  return h.str();
}

// What a matrix cell shows at a glance: one mark and one colour (the verdict for the role; the
// mark is what the check found: held or broken).
struct Kind {
  const char* css;
  const char* mark;
  const char* words;
};

constexpr const char* kHeld = "\xe2\x9c\x93";    // ✓ the practice held
constexpr const char* kBroken = "\xe2\x9c\x97";  // ✗ the practice was broken

Kind kind_of(const Cell& c) {
  switch (c.verdict) {
    case Verdict::kSkipped: return {"k-skip", "\xe2\x80\x93", "skipped"};
    case Verdict::kError: return {"k-error", "!", "error: the check could not judge"};
    case Verdict::kMissed: return {"k-missed", kHeld, "missed: a broken variant passed (the suite is wrong)"};
    case Verdict::kFalseAlarm: return {"k-alarm", kBroken, "false alarm: the suite's reference failed (the suite is wrong)"};
    case Verdict::kFail: return {"k-fail", kBroken, "fail: your recipe breaks this practice"};
    case Verdict::kOk: break;
  }
  if (c.expected == Expected::kAny) {
    return {"k-quiet", c.outcome == Outcome::kFail ? kBroken : kHeld, "recorded, not judged"};
  }
  if (c.expected == Expected::kFail) return {"k-caught", kBroken, "caught: the broken variant fails this check"};
  if (c.role == Role::kSubject) return {"k-pass", kHeld, "passed: your recipe keeps this practice"};
  return {"k-pass", kHeld, "passed"};
}

// The kinds in the order of the legend and of the counts.
constexpr const char* kKindOrder[] = {"k-pass", "k-caught", "k-fail", "k-missed", "k-alarm",
                                      "k-error", "k-skip", "k-quiet"};

const char* role_words(Role r) {
  switch (r) {
    case Role::kSubject: return "your recipes (subjects under test)";
    case Role::kReference: return "the suite's reference (a control: must pass)";
    case Role::kVariant: return "the suite's broken variants (controls: must be caught)";
  }
  return "?";
}

// One cell of the matrix: its mark; the verdict, evidence, promises and metrics one click away.
// `chart`: the id of its loss chart in the section below, or empty.
void cell_element(std::ostringstream& h, const Cell& c, const std::string& chart) {
  const Kind k = kind_of(c);
  const char* v = to_string(c.verdict);
  h << "<td class=\"cell " << k.css << "\" data-check=\"" << escape(c.check) << "\" data-recipe=\""
    << escape(c.recipe) << "\" data-device=\"" << escape(c.device) << "\" data-verdict=\"" << v
    << "\" data-role=\"" << to_string(c.role) << "\"><details><summary title=\"" << k.words << "\">" << k.mark
    << "</summary><div class=\"detail\"><b>" << escape(c.check) << " / " << escape(c.recipe) << "</b>: " << k.words
    << " <span class=\"muted\">(" << v << ", expected " << to_string(c.expected) << ", " << num(c.duration_s)
    << " s)</span>";
  h << "<pre class=\"evidence\">" << html::escape_text(c.evidence) << "</pre>";
  h << promises_list(c);
  if (!chart.empty()) h << "<a href=\"#" << chart << "\">loss curves</a>";
  // The metrics but the promises (listed above); a cell recorded, not judged, keeps its page light:
  // its metrics stay in the report JSON.
  nlohmann::json metrics = c.metrics;
  if (metrics.is_object()) metrics.erase("promises");
  if (c.expected == Expected::kAny) {
    if (!metrics.empty()) h << "<div class=\"muted\">metrics: in the report JSON</div>";
  } else if (!metrics.empty()) {
    h << "<details><summary>metrics</summary><pre>" << html::escape_text(metrics.dump()) << "</pre></details>";
  }
  h << "</div></details></td>";
}

// The cells' counts by role and kind: the suite's own controls apart from the recipes under test.
void summary_section(std::ostringstream& h, const std::vector<Cell>& cells) {
  std::map<Role, int> totals;
  std::map<Role, std::map<std::string, std::pair<Kind, int>>> counts;  // role -> kind -> (kind, count)
  for (const Cell& c : cells) {
    const Kind k = kind_of(c);
    ++totals[c.role];
    ++counts[c.role].try_emplace(k.css, k, 0).first->second.second;
  }
  h << "<table id=\"by-role\"><tbody>\n";
  for (Role r : {Role::kSubject, Role::kReference, Role::kVariant}) {
    auto it = counts.find(r);
    if (it == counts.end()) continue;
    h << "<tr data-role=\"" << to_string(r) << "\"><th>" << role_words(r) << "</th><td>" << totals[r]
      << " cells</td><td>";
    for (const char* css : kKindOrder) {
      auto n = it->second.find(css);
      if (n == it->second.end()) continue;
      const Kind& k = n->second.first;
      h << "<span class=\"count " << k.css << "\"><b>" << k.mark << "</b> " << n->second.second << " " << k.words
        << "</span> ";
    }
    h << "</td></tr>\n";
  }
  h << "</tbody></table>\n";
}

void legend(std::ostringstream& h) {
  h << "<p class=\"legend\">";
  const Cell samples[] = {
      [] { Cell c; c.verdict = Verdict::kOk; c.expected = Expected::kPass; return c; }(),
      [] { Cell c; c.verdict = Verdict::kOk; c.expected = Expected::kFail; return c; }(),
      [] { Cell c; c.verdict = Verdict::kFail; return c; }(),
      [] { Cell c; c.verdict = Verdict::kMissed; return c; }(),
      [] { Cell c; c.verdict = Verdict::kFalseAlarm; return c; }(),
      [] { Cell c; c.verdict = Verdict::kError; return c; }(),
      [] { Cell c; c.verdict = Verdict::kSkipped; return c; }(),
      [] { Cell c; c.verdict = Verdict::kOk; c.expected = Expected::kAny; return c; }()};
  for (const Cell& c : samples) {
    const Kind k = kind_of(c);
    h << "<span class=\"" << k.css << "\"><b>" << k.mark << "</b> " << k.words << "</span>";
  }
  h << "</p>\n";
}

// The report's own CSS: the matrix as marks, the check names upright in narrow columns.
const char* kReportCss =
    "table.matrix thead th+th{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:500}\n"
    "table.matrix td.cell{padding:0;text-align:center;min-width:1.6em}table.matrix summary{list-style:none;"
    "padding:.1em .4em;font-weight:700}table.matrix summary::-webkit-details-marker{display:none}\n"
    "table.matrix .detail{text-align:left;min-width:32em;font-weight:400;color:#202124;background:#fff;padding:.3em}\n"
    "table.matrix th.recipe{white-space:nowrap}.tag{font-size:.75em;font-weight:500;padding:0 .3em;margin-left:.4em;"
    "border-radius:.3em;background:#e8f0fe;color:#174ea6}\n"
    ".k-pass,.k-caught{background:#ceead6;color:#0d652d}.k-fail{background:#f6c7c3;color:#a50e0e}"
    ".k-missed,.k-alarm{background:#e9d2fd;color:#681da8}"
    ".k-error{background:#fde293;color:#7a4100}.k-skip{background:#f1f3f4;color:#80868b}"
    ".k-quiet{color:#c4c7c5}.k-quiet summary{font-weight:400!important}\n"
    "#summary .fail{background:#f6c7c3}p.legend span{display:inline-block;padding:.1em .5em;margin:0 .3em .3em 0}.count{padding:.1em .4em;margin-right:.3em}\n";

// The page's head: the tool, the run, and the verdict counts (with the "not judged" ones per check).
void header_section(std::ostringstream& h, const Report& r) {
  const Summary s = summarize(r.cells);
  h << "<h1>torchconform report</h1>\n<p>";
  h << "tool " << escape(field(r.tool, "version")) << " (commit " << escape(field(r.tool, "git_commit"))
    << "), LibTorch " << escape(field(sub(r.environment, "libtorch"), "version")) << ", started "
    << escape(field(r.run, "started_at")) << ", seed " << escape(field(r.run, "seed")) << "</p>\n<p id=\"summary\">";
  for (const auto& [verdict, count] : s.counts) {
    h << "<span class=\"" << escape(verdict) << "\">" << escape(verdict) << ": " << count << "</span> &nbsp; ";
  }
  h << "total: " << s.total << "</p>\n";
  if (!r.not_applicable.empty()) {
    std::map<std::string, int> per_check;
    for (const NotApplicable& n : r.not_applicable) ++per_check[n.check];
    h << "<p id=\"not-applicable\">not applicable (left out, not cells):";
    for (const auto& [check, n] : per_check) h << " <span class=\"count\">" << escape(check) << ": " << n << "</span>";
    std::set<std::string> why;  // each reason's head ("the check judges Python recipes only")
    for (const NotApplicable& n : r.not_applicable) why.insert(n.reason.substr(0, n.reason.find(':')));
    for (const std::string& w : why) h << " &mdash; " << escape(w);
    h << "</p>\n";
  }
  if (s.not_judged.empty()) return;
  h << "<p id=\"not-judged\">not judged (cells that ended a promise recorded without a verdict, per check):";
  for (const auto& [check, per] : s.not_judged) {
    h << " <span class=\"count\" title=\"";
    bool first = true;
    for (const auto& [id, n] : per) {
      if (id.empty()) continue;
      h << (first ? "" : ", ") << escape(id) << " " << n;
      first = false;
    }
    h << "\">" << escape(check) << ": " << per.at("") << "</span>";
  }
  h << "</p>\n";
}

// One table row of the matrix: the recipe and its cell for each check ("" where it has none).
void matrix_row(std::ostringstream& h, const Report& r, const std::string& device, const std::string& recipe,
                const std::vector<std::string>& checks, const std::map<const Cell*, std::string>& chart_ids) {
  const auto first = std::find_if(r.cells.begin(), r.cells.end(),
                                  [&](const Cell& c) { return c.device == device && c.recipe == recipe; });
  if (first == r.cells.end()) return;
  h << "<tr><th class=\"recipe\">" << escape(recipe);
  if (first->role == Role::kSubject) h << "<span class=\"tag\">your recipe</span>";
  if (first->role == Role::kReference) h << "<span class=\"tag\">reference</span>";
  h << "</th>";
  for (const std::string& k : checks) {
    auto it = std::find_if(r.cells.begin(), r.cells.end(), [&](const Cell& c) {
      return c.device == device && c.recipe == recipe && c.check == k;
    });
    if (it == r.cells.end()) {
      h << "<td></td>";
    } else {
      auto id = chart_ids.find(&*it);
      cell_element(h, *it, id == chart_ids.end() ? "" : id->second);
    }
  }
  h << "</tr>\n";
}

// The matrix, one table per device: recipes (rows) x checks (columns), in report order.
void matrix_section(std::ostringstream& h, const Report& r, const std::map<const Cell*, std::string>& chart_ids) {
  std::vector<std::string> devices, checks, recipes;
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const Cell& c : r.cells) add(devices, c.device), add(checks, c.check), add(recipes, c.recipe);
  h << "<h2>Matrix</h2>\n<p class=\"muted\">One mark per cell: " << kHeld << " the practice held, " << kBroken
    << " it was broken; the colour says whether that is what the suite expects. Click a mark for its evidence, "
       "promises and metrics.</p>\n";
  legend(h);
  if (r.cells.empty()) h << "<p>No cells in this report.</p>\n";
  for (const std::string& d : devices) {
    h << "<h3>device " << escape(d) << "</h3>\n<table class=\"matrix\" data-device=\"" << escape(d)
      << "\"><thead><tr><th>recipe \\ check</th>";
    for (const std::string& k : checks) h << "<th>" << escape(k) << "</th>";
    h << "</tr></thead><tbody>\n";
    for (const std::string& rc : recipes) matrix_row(h, r, d, rc, checks, chart_ids);
    h << "</tbody></table>\n";
  }
}

// Every compared pair of loss curves at a glance (the same charts are in each cell's details).
void curves_section(std::ostringstream& h, const Report& r, const std::map<const Cell*, std::string>& chart_ids) {
  h << "<h2>Loss curves compared</h2>\n<div class=\"curves\" style=\"display:flex;flex-wrap:wrap\">\n";
  for (const Cell& c : r.cells) {
    auto id = chart_ids.find(&c);
    if (id == chart_ids.end()) continue;
    h << "<div id=\"" << id->second << "\" data-check=\"" << escape(c.check) << "\" data-recipe=\"" << escape(c.recipe)
      << "\" data-device=\"" << escape(c.device) << "\">" << loss_chart(c) << "</div>\n";
  }
  h << "</div>\n";
  if (chart_ids.empty()) h << "<p>none in this report</p>\n";
}

void skipped_section(std::ostringstream& h, const Report& r) {
  h << "<h2>Skipped</h2>\n";
  int skipped = 0;
  for (const Cell& c : r.cells) {
    if (c.verdict != Verdict::kSkipped) continue;
    if (skipped++ == 0) h << "<ul id=\"skipped\">\n";
    h << "<li>" << escape(c.check) << " / " << escape(c.recipe) << " / " << escape(c.device) << ": "
      << escape(c.evidence) << "</li>\n";
  }
  h << (skipped ? "</ul>\n" : "<p>none</p>\n");
}

void benchmarks_section(std::ostringstream& h, const Report& r) {
  h << "<h2>Benchmarks</h2>\n";
  if (r.benchmarks.empty()) {
    h << "<p>none in this report (<code>torchconform bench</code> adds them)</p>\n";
    return;
  }
  h << "<table id=\"benchmarks\"><thead><tr><th>name</th><th>device</th><th>unit</th><th>median</th><th>cv</th>"
       "<th>n</th><th>min</th><th>max</th><th>samples (bar = median)</th><th>counters (median)</th></tr></thead>"
       "<tbody>\n";
  for (const BenchmarkRecord& b : r.benchmarks) {
    double lo = INFINITY, hi = -INFINITY;
    for (double v : b.samples) lo = std::min(lo, v), hi = std::max(hi, v);
    h << "<tr class=\"bench\" data-name=\"" << escape(b.name) << "\" data-device=\"" << escape(b.device)
      << "\"><td>" << escape(b.name) << "</td><td>" << escape(b.device) << "</td><td>" << escape(b.unit)
      << "</td><td>" << num(b.median) << "</td><td>" << num(b.cv * 100) << "%</td><td>" << b.samples.size()
      << "</td><td>" << (b.samples.empty() ? "-" : num(lo)) << "</td><td>" << (b.samples.empty() ? "-" : num(hi))
      << "</td><td>" << html::strip_plot(b.samples, lo, hi) << "</td><td>";
    // The benchmark's user counters (the amp benchmarks' MFU, TFLOP/s, ...): the median of each.
    if (b.counters.empty()) h << "-";
    bool first = true;
    for (const auto& [name, c] : b.counters) {
      h << (first ? "" : "<br>") << "<span class=\"counter\" data-counter=\"" << escape(name) << "\">" << escape(name)
        << " " << num(c.median) << "</span>";
      first = false;
    }
    h << "</td></tr>\n";
  }
  h << "</tbody></table>\n";
}

}  // namespace

std::string render_html(const Report& r) {
  std::ostringstream h;
  h << html::page_begin("torchconform report", kReportCss);
  header_section(h, r);
  summary_section(h, r.cells);
  environment_section(h, r.environment);
  // Each loss chart once, in the section below the matrix; a cell links to its own.
  std::map<const Cell*, std::string> chart_ids;
  for (const Cell& c : r.cells) {
    if (c.expected == Expected::kAny || loss_chart(c).empty()) continue;  // judged cells' curves
    const std::string id = "loss-" + std::to_string(chart_ids.size() + 1);
    chart_ids.emplace(&c, id);
  }
  matrix_section(h, r, chart_ids);
  curves_section(h, r, chart_ids);
  skipped_section(h, r);
  benchmarks_section(h, r);
  h << html::page_end();
  return h.str();
}

}  // namespace tc
