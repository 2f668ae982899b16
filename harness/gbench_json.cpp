#include "harness/gbench_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "harness/report_json.h"
#include "harness/util/statistics.h"

namespace tc {

using nlohmann::json;

bool looks_like_google_benchmark(const json& j) {
  return j.is_object() && !j.contains("schema") && j.contains("context") && j["context"].is_object() &&
         j.contains("benchmarks") && j["benchmarks"].is_array();
}

namespace {

// The context's fields as they are, or null when absent or of another type: never a conversion
// (a JSON double beyond int's range converted to int is undefined behaviour, found by
// tc_fuzz_report; a number where a string belongs threw a json::type_error past the readers).
json integer_or_null(const json& o, const char* key) {
  auto it = o.find(key);
  return (it != o.end() && it->is_number_integer()) ? *it : json(nullptr);
}

std::string string_or_empty(const json& o, const char* key) {
  auto it = o.find(key);
  return (it != o.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

// The numeric fields Google Benchmark writes into every entry itself (v1.6-1.9); any other numeric
// field of an entry is a user counter (state.counters["MFU"] is written as "MFU": 0.25).
// items_per_second and bytes_per_second become records of their own.
bool is_standard_field(const std::string& key) {
  static const std::set<std::string> standard = {
      "family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads",
      "iterations",   "real_time",                 "cpu_time",    "items_per_second", "bytes_per_second",
      "time_unit",    "error_occurred",            "aggregate_unit", "big_o", "rms"};
  return standard.count(key) > 0;
}

}  // namespace

Report report_from_google_benchmark(const json& j) {
  if (!looks_like_google_benchmark(j)) {
    throw ReportFormatError("not Google Benchmark JSON: no \"context\" object and \"benchmarks\" array");
  }
  Report r;
  const json& ctx = j["context"];
  r.tool = {{"name", "google-benchmark"}, {"version", string_or_empty(ctx, "library_version")}, {"git_commit", nullptr}};
  r.run = {{"started_at", string_or_empty(ctx, "date")}, {"argv", json::array({string_or_empty(ctx, "executable")})}};
  json env = ctx;
  env.erase("date");
  env.erase("load_avg");
  r.environment = {{"google_benchmark", env},
                   {"cpu", {{"logical_cores", integer_or_null(ctx, "num_cpus")}, {"mhz", integer_or_null(ctx, "mhz_per_cpu")}}},
                   {"os", {{"hostname", string_or_empty(ctx, "host_name")}}}};
  struct Acc {
    std::string unit;
    std::vector<double> samples;
    std::vector<double> cpu_samples;
    std::map<std::string, BenchmarkCounter> counters;
  };
  std::vector<std::string> order;
  std::map<std::string, Acc> acc;
  auto push = [&](const std::string& name, const std::string& unit, double v) {
    auto [it, fresh] = acc.try_emplace(name);
    if (fresh) {
      order.push_back(name);
      it->second.unit = unit;
    } else if (it->second.unit != unit) {
      throw ReportFormatError("benchmark '" + name + "' changes unit from '" + it->second.unit + "' to '" + unit + "'");
    }
    it->second.samples.push_back(v);
  };
  try {
    for (const json& b : j["benchmarks"]) {
      if (b.value("run_type", "iteration") != "iteration") continue;
      if (b.value("error_occurred", false)) continue;
      const std::string name = b.contains("run_name") ? b.at("run_name").get<std::string>()
                                                      : b.at("name").get<std::string>();
      push(name, b.value("time_unit", "ns"), b.at("real_time").get<double>());
      if (b.contains("cpu_time")) acc[name].cpu_samples.push_back(b["cpu_time"].get<double>());
      // User counters are the entry's other numeric fields (Google Benchmark writes them beside its own).
      for (const auto& item : b.items()) {
        if (item.value().is_number() && !is_standard_field(item.key())) {
          acc[name].counters[item.key()].samples.push_back(item.value().get<double>());
        }
      }
      if (b.contains("items_per_second")) {
        push(name + "/items_per_second", "items/s", b["items_per_second"].get<double>());
      }
      if (b.contains("bytes_per_second")) {
        push(name + "/bytes_per_second", "B/s", b["bytes_per_second"].get<double>());
      }
    }
  } catch (const json::exception& e) {
    throw ReportFormatError(std::string("malformed Google Benchmark entry: ") + e.what());
  }
  if (order.empty()) {
    throw ReportFormatError(
        "Google Benchmark JSON without per-repetition (run_type \"iteration\") entries; run it with "
        "--benchmark_repetitions=N and without --benchmark_report_aggregates_only");
  }
  for (const std::string& name : order) {
    const Acc& a = acc[name];
    BenchmarkRecord rec{name, "cpu", a.unit, a.samples, stats::median(a.samples),
                        stats::coefficient_of_variation(a.samples), a.counters};
    for (auto& [counter, c] : rec.counters) c.median = stats::median(c.samples);
    if (a.cpu_samples.size() == a.samples.size()) rec.cpu_samples = a.cpu_samples;
    r.benchmarks.push_back(std::move(rec));
  }
  return r;
}

Report read_comparable_file(const std::string& path) {
  const json j = read_json_file(path);
  try {
    if (looks_like_google_benchmark(j)) return report_from_google_benchmark(j);
    return report_from_json(j);
  } catch (const ReportFormatError& e) {
    throw ReportFormatError("report '" + path + "': " + e.what());
  }
}

}  // namespace tc
