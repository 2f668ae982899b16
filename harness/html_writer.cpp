#include "harness/html_writer.h"

#include <sstream>

namespace tc {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "n/a";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

}  // namespace

std::string render_html(const Report& r) {
  std::ostringstream h;
  Summary s = summarize(r.cells);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<title>torchconform report</title><style>"
    << "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
    << "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}"
    << ".ok{background:#e6f4ea}.missed,.false_alarm,.error{background:#fce8e6}"
    << ".skipped{background:#f1f3f4}pre{white-space:pre-wrap;margin:0;max-width:60em}"
    << "</style></head><body>\n";
  h << "<h1>torchconform report</h1>\n<p>";
  h << "tool " << escape(field(r.tool, "version")) << " (commit " << escape(field(r.tool, "git_commit"))
    << "), LibTorch " << escape(field(r.environment.value("libtorch", nlohmann::json::object()), "version"))
    << ", started " << escape(field(r.run, "started_at")) << ", seed " << escape(field(r.run, "seed"))
    << "</p>\n<p id=\"summary\">";
  for (const auto& [verdict, count] : s.counts) h << escape(verdict) << ": " << count << " &nbsp; ";
  h << "total: " << s.total << "</p>\n";
  h << "<table id=\"cells\"><thead><tr><th>check</th><th>recipe</th><th>device</th><th>expected</th>"
    << "<th>outcome</th><th>verdict</th><th>duration (s)</th><th>evidence</th></tr></thead><tbody>\n";
  for (const Cell& c : r.cells) {
    const char* v = to_string(c.verdict);
    h << "<tr class=\"cell " << v << "\" data-check=\"" << escape(c.check) << "\" data-recipe=\""
      << escape(c.recipe) << "\" data-device=\"" << escape(c.device) << "\"><td>" << escape(c.check)
      << "</td><td>" << escape(c.recipe) << "</td><td>" << escape(c.device) << "</td><td>"
      << to_string(c.expected) << "</td><td>" << to_string(c.outcome) << "</td><td>" << v
      << "</td><td>" << c.duration_s << "</td><td><details><summary>evidence</summary><pre>"
      << escape(c.evidence) << "</pre></details></td></tr>\n";
  }
  h << "</tbody></table>\n<h2>Environment</h2>\n<pre id=\"environment\">"
    << escape(r.environment.dump(2)) << "</pre>\n</body></html>\n";
  return h.str();
}

}  // namespace tc
