#include <cmath>

#include "harness/ab/ab_report.h"
#include "harness/util/statistics.h"

namespace tc {

using nlohmann::json;

namespace {

json env_json(const std::vector<std::pair<std::string, std::string>>& env) {
  json j = json::object();
  for (const auto& [k, v] : env) j[k] = v;
  return j;
}

// NaN (no median of an empty sample) is not JSON: null.
json number(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

}  // namespace

json ab_to_json(const AbRunInfo& run, const AbResult& r) {
  json thresholds = json::object();
  for (const auto& [name, t] : r.options.metric_thresholds) thresholds[name] = t;
  json j;
  j["schema"] = kAbSchema;
  j["tool"] = run.tool;
  json iterations = json::object();
  for (const auto& [name, n] : run.iterations) iterations[name] = n;
  j["run"] = {{"started_at", run.started_at},
              {"ended_at", run.ended_at},
              {"argv", run.argv},
              {"seed", run.seed},
              {"rounds_planned", run.planned_rounds},
              {"rounds", r.rounds},
              {"stopped_by_budget", run.stopped_by_budget},
              {"wall_s", run.wall_s},
              {"pairing", run.pairing},
              {"bench_flags", run.bench_flags},
              {"turn_flags", run.turn_flags},
              {"iterations", iterations},
              {"threshold", r.options.threshold},
              {"metric_thresholds", thresholds},
              {"level", r.options.level},
              {"strict", r.options.strict},
              {"time", r.options.time_name()}};
  j["base"] = {{"arg", run.base_arg}, {"binary", run.base_binary}, {"env", env_json(run.base_env)}};
  j["new"] = {{"arg", run.next_arg}, {"binary", run.next_binary}, {"env", env_json(run.next_env)}};
  j["environment_changes"] = json::array();
  for (const EnvChange& e : run.environment) {
    j["environment_changes"].push_back({{"key", e.key}, {"base", e.base}, {"new", e.next}});
  }
  j["rounds"] = json::array();
  for (size_t i = 0; i < r.round_info.size(); ++i) {
    const AbRoundInfo& info = r.round_info[i];
    j["rounds"].push_back({{"index", i},
                           {"order", info.base_first ? json({"base", "new"}) : json({"new", "base"})},
                           {"load1", info.load1 >= 0 ? json(info.load1) : json(nullptr)}});
  }
  j["benchmarks"] = json::array();
  for (const AbBench& b : r.benchmarks) {
    json interval = nullptr;
    if (b.ratio.has_interval) {
      interval = {{"lo", b.ratio.lo}, {"hi", b.ratio.hi}, {"k", b.ratio.k}, {"coverage", b.ratio.coverage}};
    }
    json beside = json::object();
    for (const auto& [name, v] : b.beside) {
      beside[name] = {{"base", v.base}, {"new", v.next},
                      {"median_base", v.base.empty() ? json(nullptr) : number(stats::median(v.base))},
                      {"median_new", v.next.empty() ? json(nullptr) : number(stats::median(v.next))}};
    }
    j["benchmarks"].push_back({{"name", b.name},
                               {"device", b.device},
                               {"unit", b.unit},
                               {"direction", b.direction == Direction::kLowerIsBetter ? "lower_is_better"
                                                                                       : "higher_is_better"},
                               {"threshold", b.threshold},
                               {"rounds", b.rounds},
                               {"base", b.base},
                               {"new", b.next},
                               {"ratios", b.ratios},
                               {"median_ratio", b.ratios.empty() ? json(nullptr) : number(b.ratio.median)},
                               {"interval", interval},
                               {"status", to_string(b.status)},
                               {"note", b.note}});
    if (!beside.empty()) j["benchmarks"].back()["beside"] = beside;  // only where counted
  }
  json summary = json::object();
  for (AbStatus s : {AbStatus::kRegression, AbStatus::kImprovement, AbStatus::kUnchanged, AbStatus::kInconclusive,
                     AbStatus::kBaseOnly, AbStatus::kNewOnly, AbStatus::kUnitChanged}) {
    summary[to_string(s)] = r.count(s);
  }
  j["summary"] = summary;
  j["exit_code"] = exit_code_for(r);
  return j;
}

}  // namespace tc
