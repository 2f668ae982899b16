#include <fstream>

#include <gtest/gtest.h>

#include "harness/compare.h"
#include "harness/compare_text.h"
#include "harness/contract/scratch.h"
#include "harness/gbench_json.h"
#include "harness/report_json.h"
#include "harness/testing/test_paths.h"

namespace tc {
namespace {

BenchmarkRecord bench(const std::string& name, const std::string& unit, std::vector<double> s) {
  return {name, "cpu", unit, s, stats::median(s), stats::coefficient_of_variation(s)};
}

Cell cell(const std::string& check, const std::string& recipe, Verdict v) {
  Cell c;
  c.check = check;
  c.recipe = recipe;
  c.device = "cpu";
  c.verdict = v;
  return c;
}

const std::vector<double> kBase{10.0, 10.1, 9.9, 10.05, 9.95, 10.02};
const std::vector<double> kSlow{12.0, 12.1, 11.9, 12.05, 11.95, 12.02};  // +20%

TEST(Compare, TimeLikeUnitSlowerAndSignificantIsARegression) {
  BenchChange b = compare_benchmark(bench("step", "ms", kBase), bench("step", "ms", kSlow), CompareOptions{});
  ASSERT_TRUE(b.test.has_value());
  EXPECT_LT(b.test->p, 0.05);
  EXPECT_NEAR(b.change, 0.2, 0.01);
  EXPECT_EQ(b.status, BenchStatus::kRegression);
}

TEST(Compare, ThroughputUnitSmallerIsWorse) {
  EXPECT_EQ(direction_for_unit("items/s"), Direction::kHigherIsBetter);
  EXPECT_EQ(direction_for_unit("GB/s"), Direction::kHigherIsBetter);
  EXPECT_EQ(direction_for_unit("TFLOP/s"), Direction::kHigherIsBetter);
  EXPECT_EQ(direction_for_unit("ns"), Direction::kLowerIsBetter);
  // The same numbers in a throughput unit: larger is an improvement, smaller a regression.
  EXPECT_EQ(compare_benchmark(bench("t", "items/s", kBase), bench("t", "items/s", kSlow), {}).status,
            BenchStatus::kImprovement);
  EXPECT_EQ(compare_benchmark(bench("t", "items/s", kSlow), bench("t", "items/s", kBase), {}).status,
            BenchStatus::kRegression);
}

TEST(Compare, BeyondThresholdButNotSignificantIsNoRegression) {
  // Overlapping, noisy samples: the medians differ by > 5% but the test cannot tell them apart.
  BenchChange b = compare_benchmark(bench("s", "ms", {10, 14, 9, 13, 11}), bench("s", "ms", {12, 9.5, 14.5, 11.8, 10}), {});
  EXPECT_GT(b.change, 0.05);
  EXPECT_FALSE(b.significant);
  EXPECT_EQ(b.status, BenchStatus::kUnchanged);
}

TEST(Compare, SignificantButWithinThresholdIsNoRegression) {
  std::vector<double> a{100, 100.1, 100.2, 100.3, 100.4, 100.5};
  std::vector<double> b{102, 102.1, 102.2, 102.3, 102.4, 102.5};  // +2%
  BenchChange c = compare_benchmark(bench("s", "ms", a), bench("s", "ms", b), {});
  EXPECT_TRUE(c.significant);
  EXPECT_EQ(c.status, BenchStatus::kUnchanged);
  // ... unless that metric's own threshold is lower.
  BenchChange d = compare_benchmark(bench("s", "ms", a), bench("s", "ms", b), CompareOptions{}.with_metric_threshold("s", 0.01));
  EXPECT_EQ(d.status, BenchStatus::kRegression);
  EXPECT_DOUBLE_EQ(d.threshold, 0.01);
}

TEST(Compare, FewSamplesWarnAndSingleSamplesAreUntested) {
  BenchChange b = compare_benchmark(bench("s", "ms", {1, 2}), bench("s", "ms", {5, 6}), {});
  EXPECT_EQ(b.status, BenchStatus::kUnchanged);  // p = 1/3 at best
  ASSERT_GE(b.warnings.size(), 2u);
  EXPECT_NE(b.warnings[0].find("few samples"), std::string::npos);
  EXPECT_NE(b.warnings[1].find("smallest possible p"), std::string::npos);
  BenchChange one = compare_benchmark(bench("s", "ms", {1}), bench("s", "ms", {50, 60}), {});
  EXPECT_EQ(one.status, BenchStatus::kUntested);
  EXPECT_FALSE(one.test.has_value());
}

TEST(Compare, VerdictThatGotWorseGatesAndBetterDoesNot) {
  Report a, b;
  a.cells = {cell("reproducibility", "no_seed", Verdict::kOk), cell("eval_mode", "reference", Verdict::kSkipped),
             cell("eval_mode", "no_eval", Verdict::kMissed)};
  b.cells = {cell("reproducibility", "no_seed", Verdict::kMissed), cell("eval_mode", "reference", Verdict::kOk),
             cell("eval_mode", "no_eval", Verdict::kOk)};
  Comparison c = compare_reports(a, b, {});
  EXPECT_EQ(c.cells_compared, 3);
  ASSERT_EQ(c.cells.size(), 3u);
  EXPECT_EQ(c.worse_cells(), 1);
  EXPECT_TRUE(c.cells[0].worse);
  EXPECT_EQ(exit_code_for(c), 1);
  Comparison back = compare_reports(b, b, {});
  EXPECT_EQ(exit_code_for(back), 0);
}

TEST(Compare, SkippedToErrorIsWorseAndANewFailingCellCounts) {
  Report a, b;
  a.cells = {cell("x", "r", Verdict::kSkipped)};
  b.cells = {cell("x", "r", Verdict::kError), cell("y", "r", Verdict::kFalseAlarm)};
  Comparison c = compare_reports(a, b, {});
  EXPECT_EQ(c.worse_cells(), 2);
}

// A user's recipe that starts failing a check (verdict fail) got worse like any other cell.
TEST(Compare, ASubjectThatStartsFailingIsWorse) {
  Report a, b;
  a.cells = {cell("reproducibility", "team_mlp", Verdict::kOk)};
  b.cells = {cell("reproducibility", "team_mlp", Verdict::kFail), cell("eval_mode", "team_mlp", Verdict::kFail)};
  Comparison c = compare_reports(a, b, {});
  EXPECT_EQ(c.worse_cells(), 2);
  EXPECT_EQ(exit_code_for(c), 1);
  EXPECT_EQ(compare_reports(b, a, {}).worse_cells(), 0);  // fail -> ok is better
}

TEST(Compare, EnvironmentDiffNamesTheChangedKeys) {
  nlohmann::json a = {{"gpu", {{"cuda_driver", "12.4"}, {"devices", {{{"name", "A100"}}}}}},
                      {"cpu", {{"flags", {"avx2", "fma"}}}}, {"libtorch", {{"version", "2.11.0"}}}};
  nlohmann::json b = a;
  b["gpu"]["cuda_driver"] = "13.0";
  b["gpu"]["devices"][0]["name"] = "H100";
  b["cpu"]["flags"] = {"fma", "avx512f", "avx2"};
  auto d = diff_environment(a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].key, "cpu.flags");
  EXPECT_NE(d[0].next.find("+avx512f"), std::string::npos);
  EXPECT_EQ(d[1].key, "gpu.cuda_driver");
  EXPECT_EQ(d[1].base, "12.4");
  EXPECT_EQ(d[2].key, "gpu.devices[0].name");
  EXPECT_TRUE(diff_environment(a, a).empty());
}

TEST(Compare, AddedRemovedAndUnitChangedNeverGate) {
  Report a, b;
  a.benchmarks = {bench("gone", "ms", kBase), bench("u", "ms", kBase)};
  b.benchmarks = {bench("new", "ms", kSlow), bench("u", "s", kSlow)};
  Comparison c = compare_reports(a, b, {});
  ASSERT_EQ(c.benchmarks.size(), 3u);
  EXPECT_EQ(c.benchmarks[0].status, BenchStatus::kAdded);
  EXPECT_EQ(c.benchmarks[1].status, BenchStatus::kUnitChanged);
  EXPECT_EQ(c.benchmarks[2].status, BenchStatus::kRemoved);
  EXPECT_EQ(exit_code_for(c), 0);
}

TEST(Compare, ParsesPercentages) {
  EXPECT_DOUBLE_EQ(parse_percent("5%"), 0.05);
  EXPECT_DOUBLE_EQ(parse_percent("12.5"), 0.125);
  EXPECT_THROW(parse_percent("five"), std::invalid_argument);
  EXPECT_THROW(parse_percent("-3%"), std::invalid_argument);
  auto [name, t] = parse_metric_threshold("reference/train_step=10%");
  EXPECT_EQ(name, "reference/train_step");
  EXPECT_DOUBLE_EQ(t, 0.10);
  EXPECT_THROW(parse_metric_threshold("10%"), std::invalid_argument);
}

// Real Google Benchmark 1.7.1 output (fixtures/gbench_fixture_program.cpp): repetitions only.
TEST(GoogleBenchmarkJson, ReadsPerRepetitionRunsGroupedByRunName) {
  Report r = read_comparable_file(std::string(tc::test_paths::source_dir()) + "/harness/tests/fixtures/gbench_base.json");
  ASSERT_EQ(r.benchmarks.size(), 3u);
  EXPECT_EQ(r.benchmarks[0].name, "BM_Sleep/iterations:20");
  EXPECT_EQ(r.benchmarks[0].unit, "ms");
  EXPECT_EQ(r.benchmarks[0].samples.size(), 6u);  // aggregates left out
  EXPECT_EQ(r.benchmarks[1].name, "BM_Sum/4096");
  EXPECT_EQ(r.benchmarks[1].unit, "ns");
  EXPECT_EQ(r.benchmarks[2].name, "BM_Sum/4096/items_per_second");
  EXPECT_EQ(r.benchmarks[2].unit, "items/s");
  EXPECT_TRUE(r.environment["google_benchmark"].contains("num_cpus"));
  EXPECT_FALSE(r.environment["google_benchmark"].contains("load_avg"));
}

// A --benchmark_out entry with user counters (Google Benchmark writes state.counters["MFU"] as a
// numeric field beside its own): each kept per repetition; its own numeric fields are not counters.
TEST(GoogleBenchmarkJson, UserCountersAreKeptPerRepetition) {
  nlohmann::json j = {{"context", {{"date", "2026-12-01T00:00:00+00:00"}, {"num_cpus", 2}, {"library_version", "v1.7.1"}}},
                      {"benchmarks", nlohmann::json::array()}};
  const double mfu[] = {0.249, 0.251, 0.247};
  for (int i = 0; i < 3; ++i) {
    j["benchmarks"].push_back({{"name", "amp/train_step/transformer/bf16/device:cpu"},
                               {"run_name", "amp/train_step/transformer/bf16/device:cpu"},
                               {"run_type", "iteration"}, {"family_index", 0}, {"per_family_instance_index", 0},
                               {"repetitions", 3}, {"repetition_index", i}, {"threads", 1}, {"iterations", 2},
                               {"real_time", 1500.0 + i}, {"cpu_time", 1490.0}, {"time_unit", "ms"},
                               {"MFU", mfu[i]}, {"TFLOP/s", 0.0009}, {"label", "bf16"}});
  }
  j["benchmarks"].push_back({{"name", "amp/train_step/transformer/bf16/device:cpu_median"},
                             {"run_name", "amp/train_step/transformer/bf16/device:cpu"},
                             {"run_type", "aggregate"}, {"aggregate_name", "median"}, {"real_time", 1501.0},
                             {"time_unit", "ms"}, {"MFU", 0.249}});
  const Report r = report_from_google_benchmark(j);
  ASSERT_EQ(r.benchmarks.size(), 1u);
  const BenchmarkRecord& b = r.benchmarks[0];
  EXPECT_EQ(b.samples.size(), 3u);
  ASSERT_EQ(b.counters.size(), 2u);  // MFU and TFLOP/s; not iterations, threads, cpu_time, ...
  EXPECT_EQ(b.counters.at("MFU").samples, (std::vector<double>{0.249, 0.251, 0.247}));
  EXPECT_DOUBLE_EQ(b.counters.at("MFU").median, 0.249);
  EXPECT_EQ(b.counters.at("TFLOP/s").samples.size(), 3u);
  EXPECT_EQ(b.cpu_samples, (std::vector<double>{1490.0, 1490.0, 1490.0}));  // cpu_time per repetition
}

TEST(GoogleBenchmarkJson, SlowedSleepIsARegressionOfTheGate) {
  const std::string dir = std::string(tc::test_paths::source_dir()) + "/harness/tests/fixtures/";
  Comparison c = compare_reports(read_comparable_file(dir + "gbench_base.json"),
                                 read_comparable_file(dir + "gbench_slow.json"), CompareOptions{});
  EXPECT_EQ(c.benchmarks[0].name, "BM_Sleep/iterations:20");
  EXPECT_EQ(c.benchmarks[0].status, BenchStatus::kRegression) << render_compare_text(c);
  EXPECT_EQ(exit_code_for(c), 1);
}

TEST(GoogleBenchmarkJson, RejectsDocumentsWithoutRepetitions) {
  nlohmann::json j = {{"context", nlohmann::json::object()},
                      {"benchmarks", {{{"name", "a_mean"}, {"run_name", "a"}, {"run_type", "aggregate"}}}}};
  EXPECT_THROW(report_from_google_benchmark(j), ReportFormatError);
}

TEST(ReadComparableFile, NamesTheFileOnBadInput) {
  const Scratch scratch("tc-compare-test-");
  const std::string path = scratch.file("not-a-report.json");
  std::ofstream(path) << "{\"hello\": 1}";
  try {
    read_comparable_file(path);
    FAIL() << "no error";
  } catch (const ReportFormatError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(Compare, InstructionCountsOnBothSidesGateAndTheTimeBesideThemIsReported) {
  // Time: +20%, significant (a busy machine); counts: the same work. The counts' row gates.
  BenchmarkRecord a = bench("step", "ms", kBase), b = bench("step", "ms", kSlow);
  a.counters["instructions"] = {{9.000e6, 9.004e6, 9.002e6, 9.001e6, 9.003e6}, 9.002e6};
  b.counters["instructions"] = {{9.003e6, 9.001e6, 9.004e6, 9.000e6, 9.002e6}, 9.002e6};
  Report base, next;
  base.benchmarks = {a};
  next.benchmarks = {b};
  Comparison c = compare_reports(base, next, CompareOptions{});
  ASSERT_EQ(c.benchmarks.size(), 2u);
  EXPECT_EQ(c.benchmarks[0].unit, "ms");
  EXPECT_EQ(c.benchmarks[0].status, BenchStatus::kRegression);
  EXPECT_FALSE(c.benchmarks[0].gating);
  EXPECT_TRUE(c.benchmarks[1].instructions);
  EXPECT_EQ(c.benchmarks[1].unit, "instructions");
  EXPECT_EQ(c.benchmarks[1].status, BenchStatus::kUnchanged);
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_EQ(exit_code_for(c), 0);
  EXPECT_NE(render_compare_text(c).find("regression (not gating)"), std::string::npos);
  // --gate-time: the time row gates as well.
  CompareOptions both;
  both.gate_time_too = true;
  EXPECT_EQ(exit_code_for(compare_reports(base, next, both)), 1);

  // +1% of instructions in every counted repetition: beyond the 0.5% instruction threshold.
  for (double& v : next.benchmarks[0].counters["instructions"].samples) v *= 1.01;
  next.benchmarks[0].counters["instructions"].median *= 1.01;
  next.benchmarks[0].samples = kBase;
  c = compare_reports(base, next, CompareOptions{});
  EXPECT_EQ(c.benchmarks[1].status, BenchStatus::kRegression);
  EXPECT_NEAR(c.benchmarks[1].change, 0.01, 1e-6);
  EXPECT_EQ(exit_code_for(c), 1);
}

TEST(Compare, ACountOnOneSideOnlyLeavesTheTimeGating) {
  BenchmarkRecord a = bench("step", "ms", kBase), b = bench("step", "ms", kSlow);
  a.counters["instructions"] = {{9.0e6, 9.0e6}, 9.0e6};
  Report base, next;
  base.benchmarks = {a};
  next.benchmarks = {b};
  const Comparison c = compare_reports(base, next, CompareOptions{});
  ASSERT_EQ(c.benchmarks.size(), 1u);
  EXPECT_TRUE(c.benchmarks[0].gating);
  EXPECT_EQ(exit_code_for(c), 1);
}

TEST(Compare, SimulatedCacheMissesAreShownBesideTheCountsAndNeverGate) {
  // The same instructions; the L1 misses +40% (a layout change, say): shown, marked, not gating.
  BenchmarkRecord a = bench("step", "ms", kBase), b = bench("step", "ms", kBase);
  a.counters["instructions"] = {{9.000e6, 9.004e6, 9.002e6, 9.001e6, 9.003e6}, 9.002e6};
  b.counters["instructions"] = {{9.003e6, 9.001e6, 9.004e6, 9.000e6, 9.002e6}, 9.002e6};
  a.counters["l1_misses"] = {{2.30e5, 2.31e5, 2.30e5, 2.32e5, 2.31e5}, 2.31e5};
  b.counters["l1_misses"] = {{3.22e5, 3.23e5, 3.24e5, 3.22e5, 3.25e5}, 3.23e5};
  a.counters["ll_misses"] = {{10, 12, 9, 11, 10}, 10};
  b.counters["ll_misses"] = {{11, 9, 10, 12, 10}, 10};
  Report base, next;
  base.benchmarks = {a};
  next.benchmarks = {b};
  const Comparison c = compare_reports(base, next, CompareOptions{});
  ASSERT_EQ(c.benchmarks.size(), 4u);  // time, instructions, L1 misses, LL misses
  EXPECT_EQ(c.benchmarks[2].unit, "L1 misses");
  EXPECT_EQ(c.benchmarks[2].status, BenchStatus::kRegression);
  EXPECT_FALSE(c.benchmarks[2].gating);
  EXPECT_EQ(c.benchmarks[3].unit, "LL misses");
  EXPECT_EQ(c.benchmarks[3].status, BenchStatus::kUnchanged);
  EXPECT_EQ(c.regressions(), 0);
  EXPECT_EQ(exit_code_for(c), 0);
  const std::string text = render_compare_text(c);
  EXPECT_NE(text.find("L1 misses"), std::string::npos) << text;
  EXPECT_NE(text.find("simulated cache misses: reported, not gating"), std::string::npos) << text;
  // Misses without the counts on both sides (an older report): no rows of theirs.
  base.benchmarks[0].counters.erase("instructions");
  EXPECT_EQ(compare_reports(base, next, CompareOptions{}).benchmarks.size(), 1u);
}

}  // namespace
}  // namespace tc
