#include "harness/html_writer.h"

#include <algorithm>
#include <cmath>
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

void cell_element(std::ostringstream& h, const Cell& c) {
  const char* v = to_string(c.verdict);
  h << "<td class=\"cell " << v << "\" data-check=\"" << escape(c.check) << "\" data-recipe=\"" << escape(c.recipe)
    << "\" data-device=\"" << escape(c.device) << "\" data-verdict=\"" << v << "\"><details><summary><span class=\"verdict\">"
    << v << "</span> <span class=\"muted\">expected " << to_string(c.expected) << ", outcome " << to_string(c.outcome)
    << "</span></summary>";
  h << "<pre class=\"evidence\">" << escape(c.evidence) << "</pre>";
  h << promises_list(c);
  h << loss_chart(c);
  h << "<details><summary>metrics</summary><pre>" << escape(c.metrics.dump(1)) << "</pre></details>";
  h << "<div class=\"muted\">" << num(c.duration_s) << " s</div></details></td>";
}

}  // namespace

std::string render_html(const Report& r) {
  std::ostringstream h;
  Summary s = summarize(r.cells);
  h << html::page_begin("torchconform report");
  h << "<h1>torchconform report</h1>\n<p>";
  h << "tool " << escape(field(r.tool, "version")) << " (commit " << escape(field(r.tool, "git_commit"))
    << "), LibTorch " << escape(field(sub(r.environment, "libtorch"), "version")) << ", started "
    << escape(field(r.run, "started_at")) << ", seed " << escape(field(r.run, "seed")) << "</p>\n<p id=\"summary\">";
  for (const auto& [verdict, count] : s.counts) {
    h << "<span class=\"" << escape(verdict) << "\">" << escape(verdict) << ": " << count << "</span> &nbsp; ";
  }
  h << "total: " << s.total << "</p>\n";
  environment_section(h, r.environment);

  // The matrix, one table per device: recipes (rows) x checks (columns), in report order.
  std::vector<std::string> devices, checks, recipes;
  auto add = [](std::vector<std::string>& v, const std::string& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  for (const Cell& c : r.cells) add(devices, c.device), add(checks, c.check), add(recipes, c.recipe);
  h << "<h2>Matrix</h2>\n<p class=\"muted\">Click a verdict for its evidence, metrics and loss curves.</p>\n";
  if (r.cells.empty()) h << "<p>No cells in this report.</p>\n";
  for (const std::string& d : devices) {
    h << "<h3>device " << escape(d) << "</h3>\n<table class=\"matrix\" data-device=\"" << escape(d)
      << "\"><thead><tr><th>recipe \\ check</th>";
    for (const std::string& k : checks) h << "<th>" << escape(k) << "</th>";
    h << "</tr></thead><tbody>\n";
    for (const std::string& rc : recipes) {
      bool any = false;
      for (const Cell& c : r.cells) any = any || (c.device == d && c.recipe == rc);
      if (!any) continue;
      h << "<tr><th>" << escape(rc) << "</th>";
      for (const std::string& k : checks) {
        auto it = std::find_if(r.cells.begin(), r.cells.end(), [&](const Cell& c) {
          return c.device == d && c.recipe == rc && c.check == k;
        });
        if (it == r.cells.end()) h << "<td class=\"muted\">&ndash;</td>";
        else cell_element(h, *it);
      }
      h << "</tr>\n";
    }
    h << "</tbody></table>\n";
  }

  // Every compared pair of loss curves at a glance (the same charts are in each cell's details).
  h << "<h2>Loss curves compared</h2>\n<div class=\"curves\" style=\"display:flex;flex-wrap:wrap\">\n";
  int charts = 0;
  for (const Cell& c : r.cells) {
    std::string chart = loss_chart(c);
    if (!chart.empty()) h << chart << '\n', ++charts;
  }
  h << "</div>\n";
  if (charts == 0) h << "<p>none in this report</p>\n";

  h << "<h2>Skipped</h2>\n";
  int skipped = 0;
  for (const Cell& c : r.cells) {
    if (c.verdict != Verdict::kSkipped) continue;
    if (skipped++ == 0) h << "<ul id=\"skipped\">\n";
    h << "<li>" << escape(c.check) << " / " << escape(c.recipe) << " / " << escape(c.device) << ": "
      << escape(c.evidence) << "</li>\n";
  }
  h << (skipped ? "</ul>\n" : "<p>none</p>\n");

  h << "<h2>Benchmarks</h2>\n";
  if (r.benchmarks.empty()) {
    h << "<p>none in this report (<code>torchconform bench</code> adds them)</p>\n";
  } else {
    h << "<table id=\"benchmarks\"><thead><tr><th>name</th><th>device</th><th>unit</th><th>median</th><th>cv</th>"
         "<th>n</th><th>min</th><th>max</th><th>samples (bar = median)</th></tr></thead><tbody>\n";
    for (const BenchmarkRecord& b : r.benchmarks) {
      double lo = INFINITY, hi = -INFINITY;
      for (double v : b.samples) lo = std::min(lo, v), hi = std::max(hi, v);
      h << "<tr class=\"bench\" data-name=\"" << escape(b.name) << "\" data-device=\"" << escape(b.device)
        << "\"><td>" << escape(b.name) << "</td><td>" << escape(b.device) << "</td><td>" << escape(b.unit)
        << "</td><td>" << num(b.median) << "</td><td>" << num(b.cv * 100) << "%</td><td>" << b.samples.size()
        << "</td><td>" << (b.samples.empty() ? "-" : num(lo)) << "</td><td>" << (b.samples.empty() ? "-" : num(hi))
        << "</td><td>" << html::strip_plot(b.samples, lo, hi) << "</td></tr>\n";
    }
    h << "</tbody></table>\n";
  }
  h << html::page_end();
  return h.str();
}

}  // namespace tc
