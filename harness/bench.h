// Benchmarks through Google Benchmark, folded into the report's `benchmarks` array.
//
// A benchmark registers with tc::bench::add("name", "device", fn) (harness/contract/bench_registry.h).
// `torchconform bench [google-benchmark flags]` runs them with Google
// Benchmark's own runner; CollectingReporter forwards everything to the console reporter and keeps
// each per-repetition run; records_from_runs() turns those into BenchmarkRecords (samples = one
// value per repetition, real time in the benchmark's time unit; median and cv over them; each user
// counter, e.g. the amp benchmarks' MFU, with its value per repetition and their median).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "harness/contract/bench_registry.h"  // add(), gbench_name()
#include "harness/contract/record.h"

namespace tc::bench {

// Per-repetition runs (run_type iteration, no error) grouped by run name, in first-seen order.
// A run registered through add() gets its (name, device); any other gets its run name and "cpu".
std::vector<BenchmarkRecord> records_from_runs(const std::vector<benchmark::BenchmarkReporter::Run>& runs);

class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit CollectingReporter(std::unique_ptr<benchmark::BenchmarkReporter> display);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  const std::vector<Run>& runs() const { return runs_; }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> display_;
  std::vector<Run> runs_;
};

// Replaces the benchmarks of `into` that have the same (name, device) and appends the others.
void merge_benchmarks(std::vector<BenchmarkRecord>& into, const std::vector<BenchmarkRecord>& from);

}  // namespace tc::bench
