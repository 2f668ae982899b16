// `torchconform compare BASE.json NEW.json`: the gate between two reports. Exit 0 nothing
// regressed, 1 a benchmark regressed, a verdict got worse or (with --numerics) numerics failed,
// 2 bad input.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/common.h"
#include "harness/compare.h"
#include "harness/compare_html.h"
#include "harness/compare_text.h"
#include "harness/gbench_json.h"
#include "harness/report_json.h"


namespace tc::cli {
namespace {

struct CompareArgs {
  std::string base, next, html;
  std::string threshold = "5%";
  std::vector<std::string> metric_thresholds;
  std::string numerics = "off";
  std::string numerics_tolerance;  // empty: kNumericsTolerance
  std::string instruction_threshold = "0.5%";
  bool gate_time = false;
};

int cmd_compare(const CompareArgs& a) {
  CompareOptions options;
  options.with_threshold(parse_percent(a.threshold));
  for (const std::string& m : a.metric_thresholds) {
    auto [name, t] = parse_metric_threshold(m);
    options.with_metric_threshold(name, t);
  }
  options.numerics = numerics_gate_from_string(a.numerics);
  options.instruction_threshold = parse_percent(a.instruction_threshold);
  options.gate_time_too = a.gate_time;
  if (!a.numerics_tolerance.empty()) options.numerics_tolerance = parse_percent(a.numerics_tolerance);
  Report base = read_comparable_file(a.base);
  Report next = read_comparable_file(a.next);
  const Comparison c = compare_reports(base, next, options, a.base, a.next);
  std::cout << render_compare_text(c);
  if (!a.html.empty()) write_output(a.html, render_compare_html(c));
  return exit_code_for(c);
}

}  // namespace

Command add_compare(CLI::App& app) {
  auto a = std::make_shared<CompareArgs>();
  auto* sub = app.add_subcommand(
      "compare",
      "Compare two reports (torchconform JSON or Google Benchmark JSON) and gate: exit 0 nothing "
      "regressed, 1 a benchmark regressed, a verdict got worse or (with --numerics) numerics failed, 2 bad input");
  sub->add_option("BASE.json", a->base, "The baseline report")->required();
  sub->add_option("NEW.json", a->next, "The new report")->required();
  sub->add_option("--html", a->html, "Also write the comparison as HTML");
  sub->add_option("--threshold", a->threshold, "Smallest change of a median that counts as a regression (with p < 0.05)")
      ->capture_default_str();
  sub->add_option("--metric-threshold", a->metric_thresholds, "NAME=PCT: another threshold for one benchmark (repeatable)");
  sub->add_option("--instruction-threshold", a->instruction_threshold,
                  "Threshold of the instruction-count rows (benchmarks counted in both reports, `bench --measure "
                  "instructions`): identical builds' counts differ by about 0.1%")
      ->capture_default_str();
  sub->add_flag("--gate-time", a->gate_time,
                "A benchmark counted in both reports gates on its time too (by default its counts gate, its time is "
                "reported)");
  sub->add_option("--numerics", a->numerics,
                  "Whether numerics drift between the reports' training fingerprints gates: off (reported, "
                  "not gating), tolerant (a diverged cell fails), strict (any cell not bitwise identical fails)")
      ->capture_default_str();
  sub->add_option("--numerics-tolerance", a->numerics_tolerance,
                  "Relative difference of a loss (or the final parameters' L2 norm, max |x|) beyond which a "
                  "cell diverged (default 2^-10, about 0.098%; see docs/benchmarks-and-gating.md)");
  return {sub, [a] { return cmd_compare(*a); }};
}

}  // namespace tc::cli
