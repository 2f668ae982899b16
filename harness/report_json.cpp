#include "harness/report_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "harness/util/sha256.h"

namespace tc {

using nlohmann::json;

json cell_to_json(const Cell& c) {
  json j = {{"check", c.check},
            {"recipe", c.recipe},
            {"role", to_string(c.role)},
            {"device", c.device},
            {"expected", to_string(c.expected)},
            {"outcome", to_string(c.outcome)},
            {"verdict", to_string(c.verdict)},
            {"evidence", c.evidence},
            {"metrics", c.metrics},
            {"duration_s", c.duration_s}};
  if (!c.language.empty()) j["language"] = c.language;  // absent: C++ (every report before Python recipes)
  return j;
}

Cell cell_from_json(const json& j) {
  Cell c;
  c.check = j.at("check").get<std::string>();
  c.recipe = j.at("recipe").get<std::string>();
  c.device = j.at("device").get<std::string>();
  c.expected = expected_from_string(j.at("expected").get<std::string>());
  // A report written before roles (no "role"): its correct recipes were all the suite's controls.
  c.role = j.contains("role") ? role_from_string(j["role"].get<std::string>())
                              : c.expected == Expected::kPass ? Role::kReference : Role::kVariant;
  c.outcome = outcome_from_string(j.at("outcome").get<std::string>());
  c.verdict = verdict_from_string(j.at("verdict").get<std::string>());
  c.evidence = j.at("evidence").get<std::string>();
  c.metrics = j.at("metrics");
  c.duration_s = j.at("duration_s").get<double>();
  if (j.contains("language")) c.language = j.at("language").get<std::string>();
  return c;
}

json report_to_json(const Report& r) {
  json cells = json::array();
  for (const Cell& c : r.cells) cells.push_back(cell_to_json(c));
  json benchmarks = json::array();
  for (const BenchmarkRecord& b : r.benchmarks) {
    json entry = {{"name", b.name}, {"device", b.device}, {"unit", b.unit},
                  {"samples", b.samples}, {"median", b.median}, {"cv", b.cv}};
    // Only a benchmark with user counters has the field: reports without counters read as before.
    if (!b.counters.empty()) {
      json counters = json::object();
      for (const auto& [name, c] : b.counters) counters[name] = {{"samples", c.samples}, {"median", c.median}};
      entry["counters"] = counters;
    }
    if (!b.cpu_samples.empty()) entry["cpu_samples"] = b.cpu_samples;
    benchmarks.push_back(std::move(entry));
  }
  Summary s = summarize(r.cells);
  json summary = s.counts;
  summary["total"] = s.total;
  summary["by_role"] = s.by_role;
  json not_judged = json::object();
  for (const auto& [check, per] : s.not_judged) {
    json promises = json::object();
    for (const auto& [id, n] : per) {
      if (!id.empty()) promises[id] = n;
    }
    not_judged[check] = {{"cells", per.count("") ? per.at("") : 0}, {"promises", promises}};
  }
  summary["not_judged"] = not_judged;
  json teeth = json::object();
  for (const auto& [check, t] : s.teeth) {
    const double score = t.mutation_score(), rate = t.false_alarm_rate();
    teeth[check] = {{"controls", t.controls},         {"false_alarms", t.false_alarms},
                    {"controls_not_judged", t.controls_not_judged},
                    {"variants", t.variants},         {"caught", t.caught},
                    {"missed", t.missed},             {"variants_not_judged", t.variants_not_judged},
                    {"errors", t.errors},             {"skipped", t.skipped},
                    {"false_alarm_rate", rate < 0 ? json(nullptr) : json(rate)},
                    {"mutation_score", score < 0 ? json(nullptr) : json(score)}};
  }
  summary["teeth"] = teeth;
  summary["not_applicable"] = r.not_applicable.size();
  json not_applicable = json::array();
  for (const NotApplicable& n : r.not_applicable) {
    not_applicable.push_back({{"check", n.check}, {"recipe", n.recipe}, {"device", n.device}, {"reason", n.reason}});
  }
  json j = {{"schema", kReportSchema}, {"tool", r.tool},           {"run", r.run},
            {"environment", r.environment}, {"cells", cells}, {"benchmarks", benchmarks},
            {"summary", summary}, {"not_applicable", not_applicable}};
  j["sha256"] = report_content_sha256(j);
  return j;
}

std::string report_content_sha256(const json& j) {
  json content = j;
  content.erase("sha256");
  // dump() without indent: keys sorted (nlohmann's std::map), numbers in their shortest round-trip
  // form, so the text is the same before a write and after a read, however the file is indented.
  return sha256_hex(content.dump());
}

Report report_from_json(const json& j) {
  if (!j.is_object()) throw ReportFormatError("not a torchconform report: the document is not a JSON object");
  if (!j.contains("schema") || !j["schema"].is_string()) {
    throw ReportFormatError("not a torchconform report: no \"schema\" field");
  }
  const std::string schema = j["schema"].get<std::string>();
  if (schema != kReportSchema) {
    throw ReportFormatError("report schema is '" + schema + "', this torchconform reads '" +
                            kReportSchema + "'");
  }
  // Every top-level field is known (as the schema says: additionalProperties false), so a corrupt
  // field name is an error, not a field silently missing.
  static const std::set<std::string> known = {"schema", "tool",       "run",     "environment",
                                              "cells",  "benchmarks", "summary", "sha256", "not_applicable"};
  for (const auto& item : j.items()) {
    if (!known.count(item.key())) {
      throw ReportFormatError("not a torchconform report: unknown field \"" + item.key() +
                              "\" (corrupt or edited)");
    }
  }
  if (j.contains("sha256")) {
    std::string content_hash;
    try {
      content_hash = report_content_sha256(j);
    } catch (const json::exception& e) {
      throw ReportFormatError(std::string("malformed torchconform report: ") + e.what());
    }
    if (!j["sha256"].is_string() || j["sha256"].get<std::string>() != content_hash) {
      throw ReportFormatError(
          "report is corrupt or was edited: its content does not match its \"sha256\" field");
    }
  }
  try {
    Report r;
    r.tool = j.at("tool");
    r.run = j.at("run");
    r.environment = j.at("environment");
    for (const json& c : j.at("cells")) r.cells.push_back(cell_from_json(c));
    if (j.contains("not_applicable")) {  // absent in reports written before ->Languages
      for (const json& n : j.at("not_applicable")) {
        r.not_applicable.push_back({n.at("check").get<std::string>(), n.at("recipe").get<std::string>(),
                                    n.at("device").get<std::string>(), n.at("reason").get<std::string>()});
      }
    }
    for (const json& b : j.at("benchmarks")) {
      BenchmarkRecord rec;
      rec.name = b.at("name").get<std::string>();
      rec.device = b.at("device").get<std::string>();
      rec.unit = b.at("unit").get<std::string>();
      rec.samples = b.at("samples").get<std::vector<double>>();
      rec.median = b.at("median").get<double>();
      rec.cv = b.at("cv").get<double>();
      if (b.contains("counters")) {  // absent in reports written before counters were kept
        if (!b["counters"].is_object()) throw ReportFormatError("malformed torchconform report: a benchmark's \"counters\" is not an object");
        for (const auto& item : b["counters"].items()) {
          BenchmarkCounter c;
          c.samples = item.value().at("samples").get<std::vector<double>>();
          c.median = item.value().at("median").get<double>();
          rec.counters.emplace(item.key(), std::move(c));
        }
      }
      if (b.contains("cpu_samples")) {  // absent in reports written before CPU time was kept
        rec.cpu_samples = b["cpu_samples"].get<std::vector<double>>();
        if (rec.cpu_samples.size() != rec.samples.size()) {
          throw ReportFormatError("malformed torchconform report: benchmark '" + rec.name + "' has " +
                                  std::to_string(rec.samples.size()) + " samples but " +
                                  std::to_string(rec.cpu_samples.size()) + " cpu_samples");
        }
      }
      r.benchmarks.push_back(std::move(rec));
    }
    return r;
  } catch (const json::exception& e) {
    throw ReportFormatError(std::string("malformed torchconform report: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw ReportFormatError(std::string("malformed torchconform report: ") + e.what());
  }
}

json parse_json_text(const std::string& text, const std::string& path) {
  // A depth limit: nlohmann's parser is iterative, but copying, dumping and destroying a value
  // recurse, so a document nested a million levels deep would overflow the stack later on.
  json::parser_callback_t limit_depth = [&path](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) {
      throw ReportFormatError("report '" + path + "' is nested deeper than " +
                              std::to_string(kMaxJsonDepth) + " levels: not a report");
    }
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number too large for a double (found by the fuzzer:
    // harness/fuzz/regressions/report/number-overflow.json).
    throw ReportFormatError("report '" + path + "' is not valid JSON: " + e.what());
  }
}

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportFormatError("cannot read report '" + path + "': " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) throw ReportFormatError("cannot read report '" + path + "': read error");
  return parse_json_text(text, path);
}

Report read_report_file(const std::string& path) {
  const json j = read_json_file(path);
  try {
    return report_from_json(j);
  } catch (const ReportFormatError& e) {
    throw ReportFormatError("report '" + path + "': " + e.what());
  }
}

}  // namespace tc
