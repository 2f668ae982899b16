// Approval tests of the reporters: fixed records rendered and diffed against the files checked in
// under harness/tests/approved/ (harness/tests/approval.h; ab's and qualify's are in their rooms'
// tests).
#include <cstdlib>
#include <tuple>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/tests/approval.h"
#include "harness/catalogue.h"
#include "harness/contract/run.h"
#include "harness/compare.h"
#include "harness/console.h"
#include "harness/compare_html.h"
#include "harness/compare_text.h"
#include "harness/html_writer.h"
#include "harness/report_json.h"
#include "harness/trend.h"
#include "harness/trend_text.h"
#include "harness/trend_html.h"

namespace tc {
namespace {

namespace fs = std::filesystem;

Cell make_cell(const std::string& check, const std::string& recipe, const std::string& device, Expected e,
               Outcome o, Verdict v, const std::string& evidence, nlohmann::json metrics) {
  Cell c;
  c.check = check;
  c.recipe = recipe;
  c.device = device;
  c.expected = e;
  c.outcome = o;
  c.verdict = v;
  c.evidence = evidence;
  c.metrics = std::move(metrics);
  c.duration_s = 0.5;
  return c;
}

BenchmarkRecord bench_record(const std::string& name, const std::string& unit, std::vector<double> s) {
  return {name, "cpu", unit, s, stats::median(s), stats::coefficient_of_variation(s)};
}

Report fixed_report() {
  Report r;
  r.tool = {{"name", "torchconform"}, {"version", "0.1.0"}, {"git_commit", "0123456789abcdef"}};
  r.run = {{"started_at", "2026-01-01T00:00:00Z"}, {"ended_at", "2026-01-01T00:01:00Z"},
           {"argv", {"torchconform", "run"}}, {"seed", 1234}, {"quick", false}, {"devices", {"cpu", "cuda"}}};
  r.environment = {{"libtorch", {{"version", "2.15.0"}}},
                   {"gpu", {{"cuda_compiled", true}, {"cuda_available", false}, {"cuda_runtime", "13.2"},
                            {"cuda_driver", nullptr}, {"cudnn", "91900"}, {"nccl", "2.28.9"},
                            {"devices", nlohmann::json::array()}}},
                   {"cpu", {{"model", "Example CPU @ 2.0GHz"}, {"logical_cores", 2}, {"flags", {"avx2", "fma"}}}},
                   {"os", {{"name", "Debian GNU/Linux 12"}, {"kernel", "6.1"}, {"arch", "x86_64"}, {"hostname", "host"}}},
                   {"build", {{"compiler", "gcc 12"}, {"build_type", "Release"}}},
                   {"flags", {{"deterministic_algorithms", true}, {"cudnn_deterministic", true},
                              {"cudnn_benchmark", false}, {"allow_tf32_cublas", false}, {"allow_tf32_cudnn", true}}},
                   {"env_vars", {{"OMP_NUM_THREADS", nullptr}}}};
  r.cells.push_back(make_cell("reproducibility", "reference", "cpu", Expected::kPass, Outcome::kPass, Verdict::kOk,
                              "loss curves, parameters and eval metrics bitwise equal",
                              {{"loss_curve_a", {2.30, 2.10, 1.90, 1.70}}, {"loss_curve_b", {2.30, 2.10, 1.90, 1.70}},
                               {"first_divergence_step", nullptr}}));
  r.cells.back().role = Role::kReference;
  r.cells.push_back(make_cell("reproducibility", "no_seed", "cpu", Expected::kFail, Outcome::kFail, Verdict::kOk,
                              "loss curves diverge at step 0 <b>&</b>",
                              {{"loss_curve_a", {2.30, 2.10, 1.90, 1.70}}, {"loss_curve_b", {2.35, 2.05, 1.95, 1.60}},
                               {"first_divergence_step", 0}}));
  r.cells.back().role = Role::kVariant;
  r.cells.push_back(make_cell("resume_equality", "no_rng_state", "cpu", Expected::kFail, Outcome::kPass,
                              Verdict::kMissed, "resumed run matched the straight run",
                              {{"loss_curve_straight", {1.0, 0.9, 0.8}}, {"loss_curve_resumed", {1.0, 0.9, 0.85}},
                               {"first_divergence_step", 2}, {"resume_at", 1}}));
  r.cells.back().role = Role::kVariant;
  r.cells.push_back(make_cell("reproducibility", "reference", "cuda", Expected::kPass, Outcome::kNone,
                              Verdict::kSkipped, "no CUDA device", nlohmann::json::object()));
  r.benchmarks.push_back(bench_record("reference/train_step", "ms", {12.0, 12.5, 11.8, 12.2, 12.1}));
  // A user counter per repetition, as `bench` keeps them (the amp benchmarks' MFU and TFLOP/s).
  const std::vector<double> mfu{0.24, 0.25, 0.23, 0.26, 0.25};
  r.benchmarks.back().counters["MFU"] = {mfu, stats::median(mfu)};
  r.benchmarks.push_back(bench_record("loader/throughput", "samples/s", {900, 950, 925, 940, 910}));
  return r;
}

// The fixed report with a user's recipe in it (a subject under test: one cell failing, one passing)
// and a broken variant's cell that is recorded, not judged.
Report report_with_subject() {
  Report r = fixed_report();
  r.cells.push_back(make_cell("reproducibility", "team_mlp", "cpu", Expected::kPass, Outcome::kFail, Verdict::kFail,
                              "loss curves diverge at step 3",
                              {{"loss_curve_a", {1.0, 0.9, 0.8, 0.7}}, {"loss_curve_b", {1.0, 0.9, 0.8, 0.75}},
                               {"first_divergence_step", 3}}));
  r.cells.back().role = Role::kSubject;
  r.cells.push_back(make_cell("resume_equality", "team_mlp", "cpu", Expected::kPass, Outcome::kPass, Verdict::kOk,
                              "resumed run equals the straight run", nlohmann::json::object()));
  r.cells.back().role = Role::kSubject;
  r.cells.push_back(make_cell("resume_equality", "no_seed", "cpu", Expected::kAny, Outcome::kPass, Verdict::kOk,
                              "resumed run equals the straight run", nlohmann::json::object()));
  r.cells.back().role = Role::kVariant;
  return r;
}

Report slower_report() {
  Report r = fixed_report();
  r.environment["gpu"]["cuda_driver"] = "580.1";
  r.environment["cpu"]["flags"] = {"avx2", "fma", "avx512f"};
  r.cells[0].verdict = Verdict::kFalseAlarm;
  r.cells[0].outcome = Outcome::kFail;
  r.cells[2].verdict = Verdict::kOk;
  r.benchmarks[0] = bench_record("reference/train_step", "ms", {17.0, 17.5, 16.8, 17.2, 17.1});
  r.benchmarks[1] = bench_record("loader/throughput", "samples/s", {930, 960, 940, 955, 925});
  r.benchmarks.push_back(bench_record("new/bench", "ns", {5}));
  return r;
}

TEST(Approval, ReportJson) {
  expect_approved("report.approved.json", report_to_json(report_with_subject()).dump(2) + "\n");
}

TEST(Approval, ReportHtml) { expect_approved("report.approved.html", render_html(report_with_subject())); }

// A training fingerprint (suites/support/fingerprint.h) of four float32 losses.
nlohmann::json fingerprint(const std::vector<std::string>& loss_hex, const std::string& sha, double l2) {
  return {{"format", "torchconform.fingerprint/1"}, {"run", "the first of the two runs with seed 1234 (4 steps)"},
          {"steps", loss_hex.size()}, {"loss_hex", loss_hex},
          {"params", {{"tensors", 2}, {"elements", 100}, {"sha256", sha}, {"sum", 1.5}, {"sum_squares", l2 * l2},
                      {"l2_norm", l2}, {"max_abs", 0.75}, {"non_finite", 0}}},
          {"largest", nlohmann::json::array()}};
}

// The compare fixtures with fingerprints: the reference's drifted (its losses 5 float32 ulps apart
// from step 2), the broken variant's diverged (never gating), the cell that got worse identical.
std::pair<Report, Report> compared_reports() {
  Report base = fixed_report(), next = slower_report();
  const std::vector<std::string> losses{"0x1.266666p+1", "0x1.0ccccdp+1", "0x1.e66666p+0", "0x1.b33334p+0"};
  base.cells[0].metrics["fingerprint"] = fingerprint(losses, std::string(64, 'a'), 2.5);
  next.cells[0].metrics["fingerprint"] = fingerprint(
      {"0x1.266666p+1", "0x1.0ccccdp+1", "0x1.e6666bp+0", "0x1.b33339p+0"}, std::string(64, 'b'), 2.5000001);
  base.cells[1].metrics["fingerprint"] = fingerprint(losses, std::string(64, 'c'), 2.5);
  next.cells[1].metrics["fingerprint"] = fingerprint(
      {"0x1.2cccccp+1", "0x1.0ccccdp+1", "0x1.e66666p+0", "0x1.b33334p+0"}, std::string(64, 'd'), 2.6);
  return {base, next};
}

TEST(Approval, CompareText) {
  auto [base, next] = compared_reports();
  Comparison c = compare_reports(base, next, CompareOptions{}, "base.json", "new.json");
  expect_approved("compare.approved.txt", render_compare_text(c));
}

TEST(Approval, CompareHtml) {
  auto [base, next] = compared_reports();
  Comparison c = compare_reports(base, next, CompareOptions{}, "base.json", "new.json");
  expect_approved("compare.approved.html", render_compare_html(c));
}

TEST(Approval, TrendTextAndHtml) {
  std::vector<Report> runs(3, fixed_report());
  for (int i = 0; i < 3; ++i) runs.push_back(slower_report());
  Trend t = compute_trend(runs, {"r1", "r2", "r3", "r4", "r5", "r6"}, TrendOptions{});
  expect_approved("trend.approved.txt", render_trend_text(t));
  expect_approved("trend.approved.html", render_trend_html(t));
}

TEST(Approval, ConsoleMatrix) {
  const Report r = report_with_subject();
  std::ostringstream os;
  for (size_t i = 0; i < r.cells.size(); ++i) print_cell_line(os, r.cells[i], i, r.cells.size());
  print_summary(os, r.cells);
  expect_approved("console.approved.txt", os.str());
}

// Every verdict name, starred and bracketed, under check names shorter than any of them: each
// matrix row keeps the header's columns, and each progress line puts the check at the same column.
TEST(Console, ColumnsStayAlignedForEveryVerdictName) {
  std::vector<Cell> cells;
  const std::vector<std::tuple<Verdict, Expected, Role>> kinds = {
      {Verdict::kFalseAlarm, Expected::kPass, Role::kReference}, {Verdict::kFail, Expected::kPass, Role::kSubject},
      {Verdict::kMissed, Expected::kFail, Role::kVariant},       {Verdict::kError, Expected::kFail, Role::kVariant},
      {Verdict::kSkipped, Expected::kFail, Role::kVariant},      {Verdict::kOk, Expected::kAny, Role::kVariant},
      {Verdict::kError, Expected::kAny, Role::kVariant},         {Verdict::kSkipped, Expected::kAny, Role::kVariant},
      {Verdict::kOk, Expected::kPass, Role::kSubject}};
  int i = 0;
  for (const auto& [v, e, role] : kinds) {
    for (const char* check : {"a", "bb", "a_much_longer_check_name"}) {
      Cell c = make_cell(check, std::string("r").append(std::to_string(i)), "cpu", e, Outcome::kFail, v, "x", nlohmann::json::object());
      c.role = role;
      cells.push_back(c);
    }
    ++i;
  }
  std::ostringstream os;
  for (size_t k = 0; k < cells.size(); ++k) print_cell_line(os, cells[k], k, cells.size());
  print_summary(os, cells);
  std::istringstream in(os.str());
  std::string line, header;
  std::vector<size_t> starts;   // where each column of the matrix starts, from its header
  size_t rows = 0, check_at = std::string::npos;
  while (std::getline(in, line)) {
    if (line.rfind("[", 0) == 0) {  // a progress line: the check name at one column for every verdict
      const size_t at = line.find_first_not_of(' ', line.find(']') + 1);
      const size_t name = line.find(' ', at);
      const size_t check = line.find_first_not_of(' ', name);
      if (check_at == std::string::npos) check_at = check;
      EXPECT_EQ(check, check_at) << line;
      EXPECT_GT(check, name) << line;
    } else if (line.rfind("recipe ", 0) == 0) {
      header = line;
      for (size_t k = 1; k < line.size(); ++k) {
        if (line[k] != ' ' && line[k - 1] == ' ') starts.push_back(k);
      }
      ASSERT_EQ(starts.size(), 3u) << line;
    } else if (!header.empty() && line.rfind("r", 0) == 0) {  // a matrix row
      ++rows;
      EXPECT_EQ(line.size(), header.size()) << line;
      for (size_t k : starts) {
        ASSERT_LT(k, line.size()) << line;
        EXPECT_EQ(line[k - 1], ' ') << "column at " << k << " runs into the previous one: " << line;
        EXPECT_NE(line[k], ' ') << "column at " << k << " is shifted: " << line;
      }
    }
  }
  EXPECT_EQ(rows, kinds.size());
}

// A registry of its own: the catalogue of `list` and `list --json` with every attribute shown.
Registry fixed_registry() {
  Registry reg;
  auto check = [](const char* name, const char* promise) {
    CheckInfo c;
    c.name = name;
    c.promise = promise;
    c.fn = [](const CheckContext&) { return CheckResult::pass("held"); };
    c.file = "suites/x/check.cpp";
    return c;
  };
  CheckInfo a = check("reproducibility", "two runs, one seed: bitwise equal");
  a.promises = {{"same_seed_bitwise", "bitwise equal"}, {"other_seed_differs", "another seed, another run"}};
  CheckInfo d = check("distributed", "DDP gradients equal one process");
  d.ranks = 2;
  d.timeout_s = 600;
  d.promises = {{"ddp_gradients", "DDP gradients equal one process"}};
  d.detects_by_throwing = {{"ddp_gradients", "Connection closed by peer"}};
  CheckInfo s = check("data_saturation", "the loader keeps up");
  s.runs_alone = true;
  s.promises = {{"data_wait", "at most 5% waiting", /*timing=*/true}};
  CheckInfo u = check("fsdp", "sharded training matches DDP (Python only)");
  u.covers_variants = false;
  u.unsupported = "no FSDP in C++";
  for (CheckInfo* c : {&a, &d, &s, &u}) reg.add_check(*c);
  auto recipe = [](const char* name, const char* description, std::vector<std::string> targets, const char* needs) {
    RecipeInfo r;
    r.name = name;
    r.description = description;
    r.targets = std::move(targets);
    r.needs = needs;
    r.make = [] { return std::unique_ptr<Run>(); };
    return r;
  };
  reg.add_recipe(recipe("reference", "every practice done right", {}, ""));
  reg.find_recipe("reference")->control = true;
  reg.add_recipe(recipe("team_mlp", "a user's own recipe", {}, ""));
  reg.add_recipe(recipe("no_seed", "never seeds", {"reproducibility"}, ""));
  reg.find_recipe("no_seed")->breaks = {{"reproducibility", {"same_seed_bitwise"}}};
  reg.add_recipe(recipe("mixed_devices", "a tensor left on the CPU", {"distributed", "reproducibility"}, "cuda"));
  return reg;
}

TEST(Approval, ListText) { expect_approved("list.approved.txt", render_catalogue_text(fixed_registry(), 0)); }

TEST(Approval, ListJson) { expect_approved("list.approved.json", catalogue_json(fixed_registry(), 2).dump(2) + "\n"); }

}  // namespace
}  // namespace tc
