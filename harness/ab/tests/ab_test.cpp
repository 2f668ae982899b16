// `ab`'s verdict on paired per-round ratios, the pairing of the rounds' records, the rounds' order
// and the reporters, on fixed records (no processes: harness/ab/ab.h is pure).
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "harness/ab/ab.h"
#include "harness/ab/ab_report.h"
#include "harness/tests/approval.h"
#include "harness/util/statistics.h"

namespace tc {
namespace {

AbBench judged(const std::vector<double>& ratios, const std::string& unit = "ms", double threshold = 0.05) {
  AbBench b;
  b.name = "step";
  b.device = "cpu";
  b.unit = unit;
  b.direction = direction_for_unit(unit);
  b.threshold = threshold;
  b.ratios = ratios;
  judge_ratios(b, 0.95);
  return b;
}

// Ten rounds: the 95% interval of the median is [x(2), x(9)] (coverage 1 - 2*11/1024 = 0.979).
const std::vector<double> kSlower{1.08, 1.11, 1.09, 1.12, 1.10, 1.07, 1.10, 1.09, 1.13, 1.10};  // about +10%
const std::vector<double> kFaster{0.90, 0.91, 0.89, 0.92, 0.90, 0.88, 0.91, 0.90, 0.93, 0.89};  // about -10%
const std::vector<double> kSame{1.00, 0.99, 1.01, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.02};

TEST(AbVerdict, WholeIntervalBeyondTheThresholdInTheWorseDirectionIsARegression) {
  const AbBench b = judged(kSlower);
  ASSERT_TRUE(b.ratio.has_interval);
  EXPECT_EQ(b.ratio.k, 2);
  EXPECT_DOUBLE_EQ(b.ratio.lo, 1.08);  // x(2) of the sorted ratios
  EXPECT_DOUBLE_EQ(b.ratio.hi, 1.12);  // x(9)
  EXPECT_DOUBLE_EQ(b.ratio.median, 1.10);
  EXPECT_EQ(b.status, AbStatus::kRegression);
  EXPECT_EQ(b.note, "");
}

TEST(AbVerdict, WholeIntervalBeyondTheThresholdInTheBetterDirectionIsAnImprovement) {
  EXPECT_EQ(judged(kFaster).status, AbStatus::kImprovement);
}

TEST(AbVerdict, IntervalWithinTheThresholdBandIsUnchanged) {
  const AbBench b = judged(kSame);
  EXPECT_EQ(b.status, AbStatus::kUnchanged);
  EXPECT_DOUBLE_EQ(b.ratio.lo, 0.99);
  EXPECT_DOUBLE_EQ(b.ratio.hi, 1.02);
}

TEST(AbVerdict, IntervalAcrossTheBandsEdgeIsInconclusive) {
  // The median is beyond +5% but the interval reaches back into the band: not shown either way.
  const AbBench b = judged({1.00, 1.09, 1.02, 1.10, 1.06, 1.03, 1.08, 1.07, 1.11, 1.06});
  EXPECT_GT(b.ratio.median, 1.05);
  EXPECT_LT(b.ratio.lo, 1.05);
  EXPECT_EQ(b.status, AbStatus::kInconclusive);
  EXPECT_NE(b.note.find("crosses the threshold band"), std::string::npos) << b.note;
  // A clear change that is smaller than the threshold reaching over the edge: inconclusive too.
  EXPECT_EQ(judged({1.04, 1.05, 1.06, 1.04, 1.05, 1.06, 1.04, 1.05, 1.06, 1.05}).status, AbStatus::kInconclusive);
}

TEST(AbVerdict, FewerThanSixRoundsHaveNoIntervalAndDecideNothing) {
  // Five rounds all 50% slower: at 95% the median needs 6 draws for an interval (n = 5: 93.75%).
  const AbBench b = judged({1.5, 1.5, 1.5, 1.5, 1.5});
  EXPECT_FALSE(b.ratio.has_interval);
  EXPECT_EQ(b.status, AbStatus::kInconclusive);
  EXPECT_NE(b.note.find("too few"), std::string::npos) << b.note;
  EXPECT_EQ(judged({1.5, 1.5, 1.5, 1.5, 1.5, 1.5}).status, AbStatus::kRegression);
}

TEST(AbVerdict, DirectionComesFromTheUnitAsInCompare) {
  // A throughput (unit ending in /s) that grew is better; one that shrank is worse.
  EXPECT_EQ(judged(kSlower, "items/s").status, AbStatus::kImprovement);
  EXPECT_EQ(judged(kFaster, "items/s").status, AbStatus::kRegression);
  EXPECT_EQ(judged(kFaster, "GB/s").status, AbStatus::kRegression);
  EXPECT_EQ(judged(kSlower, "us").status, AbStatus::kRegression);
  EXPECT_EQ(judged(kSame, "TFLOP/s").status, AbStatus::kUnchanged);
}

TEST(AbVerdict, OneDisturbedRoundDoesNotDecide) {
  // Another job slowed one side of one round by 60%: the median's interval [x(2), x(9)] leaves
  // the one extreme ratio out, so the benchmark still reads unchanged.
  std::vector<double> r = kSame;
  r[4] = 1.60;
  EXPECT_EQ(judged(r).status, AbStatus::kUnchanged);
  r[4] = 0.40;
  EXPECT_EQ(judged(r).status, AbStatus::kUnchanged);
}

BenchmarkRecord rec(const std::string& name, const std::string& unit, std::vector<double> samples,
                    const std::string& device = "cpu") {
  return {name, device, unit, samples, stats::median(samples), stats::coefficient_of_variation(samples)};
}

std::vector<AbRound> rounds_of(const std::vector<double>& base, const std::vector<double>& next) {
  std::vector<AbRound> rounds;
  for (size_t i = 0; i < base.size(); ++i) {
    AbRound r;
    r.info.index = static_cast<int>(i);
    r.info.base_first = i % 2 == 0;
    r.info.load1 = 2.0 + static_cast<double>(i);
    r.base = {rec("step", "ms", {base[i]})};
    r.next = {rec("step", "ms", {next[i]})};
    rounds.push_back(r);
  }
  return rounds;
}

TEST(AbCompare, TheRatioIsPairedWithinTheRoundSoAShiftOfTheMachineCancels) {
  // The machine gets 3x slower from round 5 on; NEW is 10% slower in every round. Unpaired, the
  // two sides' values overlap completely; paired, every ratio is 1.1.
  std::vector<double> base, next;
  for (int i = 0; i < 10; ++i) {
    const double machine = i < 5 ? 1.0 : 3.0;
    base.push_back(2.0 * machine);
    next.push_back(2.2 * machine);
  }
  const AbResult r = ab_compare(rounds_of(base, next), AbOptions{});
  ASSERT_EQ(r.benchmarks.size(), 1u);
  EXPECT_EQ(r.rounds, 10);
  EXPECT_EQ(r.benchmarks[0].ratios.size(), 10u);
  EXPECT_NEAR(r.benchmarks[0].ratio.median, 1.1, 1e-12);
  EXPECT_EQ(r.benchmarks[0].status, AbStatus::kRegression);
  EXPECT_EQ(exit_code_for(r), 1);
  // The same values with NEW equal to BASE in each round: unchanged despite the machine's shift.
  const AbResult same = ab_compare(rounds_of(base, base), AbOptions{});
  EXPECT_EQ(same.benchmarks[0].status, AbStatus::kUnchanged);
  EXPECT_EQ(exit_code_for(same), 0);
}

TEST(AbCompare, ARoundsValueIsTheMedianOfItsRepetitions) {
  EXPECT_DOUBLE_EQ(round_value(rec("s", "ms", {3.0, 1.0, 2.0})), 2.0);
  BenchmarkRecord no_samples{"s", "cpu", "ms", {}, 4.5, 0.0};
  EXPECT_DOUBLE_EQ(round_value(no_samples), 4.5);
}

TEST(AbCompare, WithCpuTimeARoundsValueIsTheMedianOfItsCpuTimes) {
  BenchmarkRecord r = rec("s", "ms", {9.0, 5.0, 7.0});
  r.cpu_samples = {3.0, 2.0, 4.0};
  EXPECT_DOUBLE_EQ(round_value(r, /*cpu_time=*/false), 7.0);
  EXPECT_DOUBLE_EQ(round_value(r, /*cpu_time=*/true), 3.0);
  EXPECT_TRUE(std::isnan(round_value(rec("s", "ms", {9.0}), /*cpu_time=*/true)));  // an older report

  // Real time swings with the machine's other jobs (NEW happened to wait for a core more), CPU time
  // shows NEW doing 10% more work in every round.
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(8, 2.0), std::vector<double>(8, 2.0));
  for (size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].base[0].samples = {4.0 + static_cast<double>(i % 3)};
    rounds[i].next[0].samples = {4.0 + static_cast<double>((i + 1) % 3)};
    rounds[i].base[0].cpu_samples = {2.0};
    rounds[i].next[0].cpu_samples = {2.2};
  }
  const AbResult real = ab_compare(rounds, AbOptions{});
  EXPECT_NE(real.benchmarks[0].status, AbStatus::kRegression);
  const AbResult cpu = ab_compare(rounds, AbOptions{}.with_cpu_time(true));
  EXPECT_NEAR(cpu.benchmarks[0].ratio.median, 1.1, 1e-12);
  EXPECT_EQ(cpu.benchmarks[0].status, AbStatus::kRegression);
  // Reports without CPU times (written by an older build): no pair, said why.
  for (AbRound& x : rounds) x.base[0].cpu_samples.clear();
  const AbResult old = ab_compare(rounds, AbOptions{}.with_cpu_time(true));
  EXPECT_EQ(old.benchmarks[0].status, AbStatus::kInconclusive);
  EXPECT_NE(old.benchmarks[0].note.find("without CPU times"), std::string::npos) << old.benchmarks[0].note;
}

TEST(AbCompare, WithInstructionsARoundsValueIsItsCountedInstructionsAndFewerIsBetter) {
  BenchmarkRecord r = rec("s", "ms", {9.0});
  EXPECT_TRUE(std::isnan(round_value(r, false, /*instructions=*/true)));  // not counted
  r.counters["instructions"] = {{1000.0, 1002.0, 1001.0}, 1001.0};
  EXPECT_DOUBLE_EQ(round_value(r, false, /*instructions=*/true), 1001.0);

  // Times swing both ways with the machine; the counts say NEW executes 1% more per iteration.
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(6, 2.0), std::vector<double>(6, 2.0));
  for (size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].base[0].samples = {4.0 + static_cast<double>(i % 3)};
    rounds[i].next[0].samples = {4.0 + static_cast<double>((i + 1) % 3)};
    rounds[i].base[0].counters["instructions"] = {{9.0e6 + static_cast<double>(i)}, 9.0e6 + static_cast<double>(i)};
    rounds[i].next[0].counters["instructions"] = {{9.09e6}, 9.09e6};
  }
  const AbResult counted = ab_compare(rounds, AbOptions{}.with_instructions(true).with_threshold(0.005));
  ASSERT_EQ(counted.benchmarks.size(), 1u);
  EXPECT_EQ(counted.benchmarks[0].unit, "instructions");
  EXPECT_EQ(counted.benchmarks[0].direction, Direction::kLowerIsBetter);
  EXPECT_NEAR(counted.benchmarks[0].ratio.median, 1.01, 1e-6);
  EXPECT_EQ(counted.benchmarks[0].status, AbStatus::kRegression);
  EXPECT_STREQ(AbOptions{}.with_instructions(true).time_name(), "instructions");
  // A side without counts (an older build): no pair, said why.
  for (AbRound& x : rounds) x.next[0].counters.clear();
  const AbResult old = ab_compare(rounds, AbOptions{}.with_instructions(true));
  EXPECT_EQ(old.benchmarks[0].status, AbStatus::kInconclusive);
  EXPECT_NE(old.benchmarks[0].note.find("no instruction counts"), std::string::npos) << old.benchmarks[0].note;
}

TEST(AbCompare, SimulatedCacheMissesAreCarriedBesideTheCountsAndNotJudged) {
  // The same instructions; NEW misses the L1 twice as often: shown beside, the verdict the counts'.
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(6, 2.0), std::vector<double>(6, 2.0));
  for (size_t i = 0; i < rounds.size(); ++i) {
    rounds[i].base[0].counters["instructions"] = {{9.0e6}, 9.0e6};
    rounds[i].next[0].counters["instructions"] = {{9.0e6}, 9.0e6};
    rounds[i].base[0].counters["l1_misses"] = {{2.3e5 + static_cast<double>(i)}, 2.3e5 + static_cast<double>(i)};
    rounds[i].next[0].counters["l1_misses"] = {{4.6e5}, 4.6e5};
    if (i != 2) rounds[i].next[0].counters["ll_misses"] = {{10.0}, 10.0};  // one round without: not shown
    rounds[i].base[0].counters["ll_misses"] = {{10.0}, 10.0};
  }
  const AbResult r = ab_compare(rounds, AbOptions{}.with_instructions(true).with_threshold(0.005));
  ASSERT_EQ(r.benchmarks.size(), 1u);
  const AbBench& b = r.benchmarks[0];
  EXPECT_EQ(b.status, AbStatus::kUnchanged);
  ASSERT_EQ(b.beside.count("l1_misses"), 1u);
  EXPECT_EQ(b.beside.at("l1_misses").base.size(), 6u);
  EXPECT_DOUBLE_EQ(b.beside.at("l1_misses").next[0], 4.6e5);
  EXPECT_EQ(b.beside.count("ll_misses"), 0u);
  // Timing runs carry none.
  EXPECT_TRUE(ab_compare(rounds, AbOptions{}).benchmarks[0].beside.empty());
}

TEST(AbCompare, PairsByNameAndDeviceAndLeavesOutRoundsMissingASide) {
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(7, 2.0), std::vector<double>(7, 2.0));
  for (AbRound& r : rounds) {
    r.base.push_back(rec("step", "ms", {9.0}, "cuda"));  // same name, another device: its own benchmark
    r.next.push_back(rec("step", "ms", {9.0}, "cuda"));
    r.base.push_back(rec("old_only", "ms", {1.0}));
    r.next.push_back(rec("new_only", "items/s", {1.0}));
  }
  rounds[3].next.erase(rounds[3].next.begin());  // NEW's cpu step missing in round 4
  const AbResult r = ab_compare(rounds, AbOptions{});
  ASSERT_EQ(r.benchmarks.size(), 4u);
  const AbBench& cpu = r.benchmarks[0];
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.ratios.size(), 6u);
  EXPECT_EQ(cpu.rounds, (std::vector<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(cpu.status, AbStatus::kUnchanged);
  EXPECT_NE(cpu.note.find("1 round(s) without a value on both sides"), std::string::npos) << cpu.note;
  EXPECT_EQ(r.benchmarks[1].device, "cuda");
  EXPECT_EQ(r.benchmarks[1].ratios.size(), 7u);
  EXPECT_EQ(r.benchmarks[2].name, "new_only");
  EXPECT_EQ(r.benchmarks[2].status, AbStatus::kNewOnly);
  EXPECT_EQ(r.benchmarks[2].direction, Direction::kHigherIsBetter);
  EXPECT_EQ(r.benchmarks[3].status, AbStatus::kBaseOnly);
  EXPECT_EQ(exit_code_for(r), 0);  // one side only is reported, not gated (as compare's added/removed)
}

TEST(AbCompare, AUnitThatChangedIsNotCompared) {
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(6, 2.0), std::vector<double>(6, 9.0));
  for (AbRound& r : rounds) r.next[0].unit = "us";
  const AbResult r = ab_compare(rounds, AbOptions{});
  EXPECT_EQ(r.benchmarks[0].status, AbStatus::kUnitChanged);
  EXPECT_EQ(exit_code_for(r), 0);
}

TEST(AbCompare, AMetricThresholdAppliesToItsBenchmarkOnly) {
  std::vector<AbRound> rounds = rounds_of(std::vector<double>(10, 2.0), std::vector<double>(10, 2.16));  // +8%
  for (AbRound& r : rounds) {
    r.base.push_back(rec("other", "ms", {2.0}));
    r.next.push_back(rec("other", "ms", {2.16}));
  }
  const AbResult r = ab_compare(rounds, AbOptions{}.with_metric_threshold("step", 0.10));
  EXPECT_EQ(r.benchmarks[0].name, "step");
  EXPECT_DOUBLE_EQ(r.benchmarks[0].threshold, 0.10);
  EXPECT_EQ(r.benchmarks[0].status, AbStatus::kUnchanged);
  EXPECT_EQ(r.benchmarks[1].status, AbStatus::kRegression);
}

TEST(AbGate, InconclusivePassesUnlessStrict) {
  const std::vector<double> base(10, 2.0);
  const std::vector<double> next{2.0, 2.18, 2.04, 2.2, 2.12, 2.06, 2.16, 2.14, 2.22, 2.12};
  const AbResult loose = ab_compare(rounds_of(base, next), AbOptions{});
  ASSERT_EQ(loose.benchmarks[0].status, AbStatus::kInconclusive);
  EXPECT_EQ(exit_code_for(loose), 0);
  EXPECT_NE(ab_gate_line(loose).find("PASS (0 regressed, 1 inconclusive"), std::string::npos) << ab_gate_line(loose);
  const AbResult strict = ab_compare(rounds_of(base, next), AbOptions{}.with_strict(true));
  EXPECT_EQ(exit_code_for(strict), 1);
  EXPECT_NE(ab_gate_line(strict).find("FAIL"), std::string::npos);
}

TEST(AbOrders, ASeedGivesTheSameOrdersAndBothOrdersOccur) {
  const std::vector<bool> a = ab_orders(42, 64), b = ab_orders(42, 64), c = ab_orders(43, 64);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto base_first = std::count(a.begin(), a.end(), true);
  EXPECT_GT(base_first, 16);  // a fair coin: 64 rounds with fewer than 16 of one side has p < 1e-4
  EXPECT_LT(base_first, 48);
}

TEST(AbReport, TextJsonAndHtmlCarryTheRatiosIntervalAndVerdict) {
  std::vector<double> base(10, 2.0), next;
  for (double x : kSlower) next.push_back(2.0 * x);
  const AbResult r = ab_compare(rounds_of(base, next), AbOptions{});
  AbRunInfo run;
  run.base_arg = "build-a";
  run.next_arg = "build-b";
  run.next_env = {{"TORCHCONFORM_BENCH_SLOWDOWN_MS", "1"}};
  run.seed = 7;
  run.planned_rounds = 10;
  run.bench_flags = {"--benchmark_repetitions=3"};
  const std::string text = render_ab_text(run, r);
  EXPECT_NE(text.find("REGRESSION (lower is better)"), std::string::npos) << text;
  EXPECT_NE(text.find("[1.080, 1.120]"), std::string::npos) << text;
  EXPECT_NE(text.find("with TORCHCONFORM_BENCH_SLOWDOWN_MS=1"), std::string::npos) << text;
  EXPECT_NE(text.find("order seed 7"), std::string::npos) << text;
  EXPECT_NE(text.find("ab gate: FAIL (1 regressed"), std::string::npos) << text;

  const nlohmann::json j = ab_to_json(run, r);
  EXPECT_EQ(j["schema"], "torchconform.ab/1");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["summary"]["regression"], 1);
  EXPECT_EQ(j["new"]["env"]["TORCHCONFORM_BENCH_SLOWDOWN_MS"], "1");
  EXPECT_EQ(j["rounds"].size(), 10u);
  EXPECT_EQ(j["rounds"][1]["order"], nlohmann::json({"new", "base"}));
  EXPECT_DOUBLE_EQ(j["rounds"][3]["load1"].get<double>(), 5.0);
  const nlohmann::json& b = j["benchmarks"][0];
  EXPECT_EQ(b["status"], "regression");
  EXPECT_EQ(b["direction"], "lower_is_better");
  EXPECT_EQ(b["ratios"].size(), 10u);
  EXPECT_DOUBLE_EQ(b["interval"]["lo"].get<double>(), 1.08);
  EXPECT_DOUBLE_EQ(b["interval"]["hi"].get<double>(), 1.12);
  EXPECT_EQ(b["interval"]["k"], 2);

  const std::string html = render_ab_html(run, r);
  EXPECT_NE(html.find("id=\"gate\" class=\"verdict FAIL\""), std::string::npos);
  EXPECT_NE(html.find("data-status=\"regression\""), std::string::npos);
  EXPECT_NE(html.find("<td>1.130</td>"), std::string::npos);  // round 9's ratio in the rounds table
  EXPECT_EQ(html.find("<script"), std::string::npos);         // self-contained, nothing to run
}

// The three outputs of `ab` for fixed rounds and a fixed run description: any difference from the
// approved files (harness/tests/approved/ab.approved.*) is a change of the format.
TEST(Approval, AbTextJsonAndHtml) {
  std::vector<double> base(10, 2.0), next;
  for (double x : kSlower) next.push_back(2.0 * x);
  std::vector<AbRound> rounds = rounds_of(base, next);
  for (size_t i = 0; i < rounds.size(); ++i) {  // a second benchmark that did not change
    rounds[i].base.push_back(rec("load", "ms", {5.0 + 0.01 * static_cast<double>(i % 3)}));
    rounds[i].next.push_back(rec("load", "ms", {5.0 + 0.01 * static_cast<double>((i + 1) % 3)}));
  }
  const AbResult r = ab_compare(rounds, AbOptions{});
  AbRunInfo run;
  run.tool = {{"name", "torchconform"}, {"version", "0.0.0-approval"}, {"git_commit", nullptr}};
  run.started_at = "2026-01-01T00:00:00Z";
  run.ended_at = "2026-01-01T00:01:00Z";
  run.argv = {"torchconform", "ab", "build-a", "build-b", "--", "--benchmark_filter=step|load"};
  run.base_arg = "build-a";
  run.next_arg = "build-b";
  run.base_binary = "/work/build-a/torchconform";
  run.next_binary = "/work/build-b/torchconform";
  run.next_env = {{"TORCHCONFORM_BENCH_SLOWDOWN_MS", "1"}};
  run.pairing = "repetition";
  run.bench_flags = {"--benchmark_filter=step|load"};
  run.turn_flags = {"--benchmark_filter=step|load", "--benchmark_min_time=0.1s"};
  run.iterations = {{"step", 19}, {"load", 40}};
  run.seed = 7;
  run.planned_rounds = 10;
  run.wall_s = 60.0;
  run.environment = {{"cpu.model", "CPU A", "CPU B"}};
  expect_approved("ab.approved.txt", render_ab_text(run, r));
  expect_approved("ab.approved.json", ab_to_json(run, r).dump(2) + "\n");
  expect_approved("ab.approved.html", render_ab_html(run, r));
}

}  // namespace
}  // namespace tc
