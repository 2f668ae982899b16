#include <gtest/gtest.h>

#include "harness/bench.h"

namespace tc::bench {
namespace {

using GRun = benchmark::BenchmarkReporter::Run;

GRun make_run(const std::string& function_name, GRun::RunType type, double real_ms, bool error = false) {
  GRun r;
  r.run_name.function_name = function_name;
  r.run_type = type;
  r.time_unit = benchmark::kMillisecond;
  r.iterations = 10;
  r.real_accumulated_time = real_ms * 10 / 1e3;  // seconds over all iterations
  r.error_occurred = error;
  return r;
}

TEST(Bench, RecordsHoldOneSamplePerRepetitionWithTheRegisteredNameAndDevice) {
  add("unit/test_bench", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  const std::string g = gbench_name("unit/test_bench", "cpu");
  std::vector<GRun> runs{make_run(g, GRun::RT_Iteration, 2.0), make_run(g, GRun::RT_Iteration, 4.0),
                        make_run(g, GRun::RT_Iteration, 3.0), make_run(g, GRun::RT_Aggregate, 3.0),
                        make_run("BM_Other", GRun::RT_Iteration, 1.0),
                        make_run("BM_Other", GRun::RT_Iteration, 9.0, /*error=*/true)};
  std::vector<BenchmarkRecord> recs = records_from_runs(runs);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "unit/test_bench");
  EXPECT_EQ(recs[0].device, "cpu");
  EXPECT_EQ(recs[0].unit, "ms");
  ASSERT_EQ(recs[0].samples.size(), 3u);  // the aggregate is left out
  EXPECT_NEAR(recs[0].samples[1], 4.0, 1e-9);
  EXPECT_NEAR(recs[0].median, 3.0, 1e-9);
  EXPECT_NEAR(recs[0].cv, 1.0 / 3.0, 1e-9);
  EXPECT_EQ(recs[1].name, "BM_Other");  // registered without tc::bench::add
  EXPECT_EQ(recs[1].samples.size(), 1u);  // the failed repetition is left out
}

TEST(Bench, RecordsKeepEachUserCounterPerRepetitionWithItsMedian) {
  add("unit/counter_bench", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  const std::string g = gbench_name("unit/counter_bench", "cpu");
  std::vector<GRun> runs;
  for (double mfu : {0.25, 0.21, 0.24}) {
    GRun r = make_run(g, GRun::RT_Iteration, 2.0);
    r.counters["MFU"] = benchmark::Counter(mfu);
    r.counters["TFLOP/s"] = benchmark::Counter(10 * mfu);
    runs.push_back(r);
  }
  GRun aggregate = make_run(g, GRun::RT_Aggregate, 2.0);
  aggregate.counters["MFU"] = benchmark::Counter(9.0);  // an aggregate's counter is not a repetition
  runs.push_back(aggregate);
  std::vector<BenchmarkRecord> recs = records_from_runs(runs);
  ASSERT_EQ(recs.size(), 1u);
  ASSERT_EQ(recs[0].counters.size(), 2u);
  const BenchmarkCounter& mfu = recs[0].counters.at("MFU");
  EXPECT_EQ(mfu.samples, (std::vector<double>{0.25, 0.21, 0.24}));
  EXPECT_DOUBLE_EQ(mfu.median, 0.24);
  EXPECT_DOUBLE_EQ(recs[0].counters.at("TFLOP/s").median, 2.4);
}

TEST(Bench, AFixedIterationCountKeepsTheRegisteredName) {
  // `bench --iterations N` (ab's repetition pairing) makes Google Benchmark add "iterations:N".
  add("unit/fixed_bench", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  GRun r = make_run(gbench_name("unit/fixed_bench", "cpu"), GRun::RT_Iteration, 2.0);
  r.run_name.iterations = "iterations:69";
  GRun with_args = make_run(gbench_name("unit/fixed_bench", "cpu"), GRun::RT_Iteration, 2.0);
  with_args.run_name.args = "256";
  with_args.run_name.iterations = "iterations:651";
  const std::vector<BenchmarkRecord> recs = records_from_runs({r, with_args});
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "unit/fixed_bench");
  EXPECT_EQ(recs[0].device, "cpu");
  EXPECT_EQ(recs[1].name, "unit/fixed_bench/device:cpu/256");  // an argument stays in the name, the count not
}

TEST(Bench, ACudaBenchmarkTimedByEventsKeepsItsNameAndDevice) {
  // UseManualTime() (the CUDA benchmarks' CUDA-event times) makes Google Benchmark add
  // "manual_time" to the run name; the record is still (name, "cuda"), its arguments kept.
  add("unit/cuda_bench", "cuda", [](benchmark::State& s) { for (auto _ : s) {} });
  GRun r = make_run(gbench_name("unit/cuda_bench", "cuda"), GRun::RT_Iteration, 2.0);
  r.run_name.time_type = "manual_time";
  GRun with_args = make_run(gbench_name("unit/cuda_bench", "cuda"), GRun::RT_Iteration, 2.0);
  with_args.run_name.args = "4096";
  with_args.run_name.time_type = "manual_time";
  const std::vector<BenchmarkRecord> recs = records_from_runs({r, with_args});
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "unit/cuda_bench");
  EXPECT_EQ(recs[0].device, "cuda");
  EXPECT_EQ(recs[1].name, "unit/cuda_bench/device:cuda/4096");
  EXPECT_EQ(recs[1].device, "cuda");
}

TEST(Bench, ARecordWithoutUserCountersHasNone) {
  add("unit/plain_bench", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  const std::string g = gbench_name("unit/plain_bench", "cpu");
  std::vector<BenchmarkRecord> recs = records_from_runs({make_run(g, GRun::RT_Iteration, 2.0)});
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_TRUE(recs[0].counters.empty());
}

TEST(Bench, RecordsKeepTheThreadsCpuTimePerRepetitionBesideTheRealTime) {
  add("unit/cpu_time_bench", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  const std::string g = gbench_name("unit/cpu_time_bench", "cpu");
  std::vector<GRun> runs;
  for (double cpu_ms : {1.5, 1.25, 1.75}) {
    GRun r = make_run(g, GRun::RT_Iteration, 2.0);  // waited 0.5 ms or more per iteration for a core
    r.cpu_accumulated_time = cpu_ms * 10 / 1e3;     // seconds over all 10 iterations
    runs.push_back(r);
  }
  const std::vector<BenchmarkRecord> recs = records_from_runs(runs);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].samples, (std::vector<double>{2.0, 2.0, 2.0}));
  ASSERT_EQ(recs[0].cpu_samples.size(), 3u);
  EXPECT_NEAR(recs[0].cpu_samples[0], 1.5, 1e-12);
  EXPECT_NEAR(recs[0].cpu_samples[1], 1.25, 1e-12);
  EXPECT_NEAR(recs[0].cpu_samples[2], 1.75, 1e-12);
}

TEST(Bench, DuplicateRegistrationIsRefused) {
  add("unit/dup", "cpu", [](benchmark::State& s) { for (auto _ : s) {} });
  EXPECT_THROW(add("unit/dup", "cpu", [](benchmark::State&) {}), std::logic_error);
}

TEST(Bench, MergeReplacesSameNameAndDeviceAndAppendsOthers) {
  std::vector<BenchmarkRecord> into{{"a", "cpu", "ms", {1}, 1, 0}, {"a", "cuda", "ms", {2}, 2, 0}};
  merge_benchmarks(into, {{"a", "cpu", "ms", {5, 6}, 5.5, 0.1}, {"b", "cpu", "ms", {7}, 7, 0}});
  ASSERT_EQ(into.size(), 3u);
  EXPECT_EQ(into[0].samples.size(), 2u);
  EXPECT_EQ(into[1].device, "cuda");
  EXPECT_EQ(into[2].name, "b");
}

}  // namespace
}  // namespace tc::bench
