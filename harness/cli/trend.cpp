// `torchconform trend RUNS...`: each benchmark's median over runs; a step change that persists.
// Exit 0 none, 1 a persistent regression, 2 bad input.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/common.h"
#include "harness/compare.h"
#include "harness/gbench_json.h"
#include "harness/report_json.h"
#include "harness/trend.h"
#include "harness/trend_html.h"
#include "harness/trend_text.h"
#include "harness/util/posix_fs.h"

namespace tc::cli {
namespace {

using nlohmann::json;

struct TrendArgs {
  std::vector<std::string> files;
  std::string html, threshold = "5%", instruction_threshold = "0.5%";
  int window = 3;
  bool gate_time = false;
};

int cmd_trend(const TrendArgs& a) {
  TrendOptions o;
  o.window = a.window;
  o.threshold = parse_percent(a.threshold);
  o.instruction_threshold = parse_percent(a.instruction_threshold);
  o.gate_time_too = a.gate_time;
  if (a.window < 1) throw UsageError("--window must be at least 1");
  std::vector<Report> runs;
  std::vector<std::string> labels;
  for (const std::string& f : a.files) {
    runs.push_back(read_comparable_file(f));
    const json& started = runs.back().run.is_object() && runs.back().run.contains("started_at")
                              ? runs.back().run["started_at"] : json();
    labels.push_back(started.is_string() && !started.get<std::string>().empty()
                         ? started.get<std::string>() + " (" + posix_fs::base_name(f) + ")"
                         : f);
  }
  const Trend t = compute_trend(runs, labels, o);
  std::cout << render_trend_text(t);
  if (!a.html.empty()) write_output(a.html, render_trend_html(t));
  return exit_code_for(t);
}

}  // namespace

Command add_trend(CLI::App& app) {
  auto a = std::make_shared<TrendArgs>();
  auto* sub = app.add_subcommand(
      "trend", "Each benchmark's median over runs (oldest first); flags a step change that persists "
               "(the last --window medians all beyond --threshold of the earlier runs' median). Exit 0 none, "
               "1 a persistent regression, 2 bad input");
  sub->add_option("RUNS", a->files, "Report JSON files, oldest first")->required();
  sub->add_option("--html", a->html, "Also write the trend as HTML");
  sub->add_option("--threshold", a->threshold, "Step size that counts")->capture_default_str();
  sub->add_option("--window", a->window, "How many latest runs must agree")->capture_default_str();
  sub->add_option("--instruction-threshold", a->instruction_threshold,
                  "Step size that counts for instruction counts (counters.instructions, `bench --measure instructions`)")
      ->capture_default_str();
  sub->add_flag("--gate-time", a->gate_time,
                "A benchmark whose instruction counts are judged gates on its time too (by default its counts gate)");
  return {sub, [a] { return cmd_trend(*a); }};
}

}  // namespace tc::cli
