#include "harness/bench.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "harness/util/statistics.h"

namespace tc::bench {

std::vector<BenchmarkRecord> records_from_runs(const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  std::vector<BenchmarkRecord> out;
  std::map<std::string, size_t> index;
  for (const auto& run : runs) {
    if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration || run.error_occurred) continue;
    // A benchmark registered through add(): named without the "iterations:N" that a fixed
    // iteration count (`bench --iterations`, ab's repetition pairing) adds to the run name, and
    // without anything else when it has no arguments: its (name, device). Nor with the
    // "/real_time" or "/manual_time" that UseRealTime()/UseManualTime() add (the CUDA benchmarks'
    // CUDA-event times): the time a record holds is said by the benchmark, not by its name.
    auto reg = registered_as(run.run_name.function_name);
    benchmark::BenchmarkName n = run.run_name;
    if (reg) {
      n.iterations.clear();
      n.time_type.clear();
    }
    const std::string key = n.str();
    auto it = index.find(key);
    if (it == index.end()) {
      BenchmarkRecord r;
      if (reg && key == n.function_name) {
        r.name = reg->first;
        r.device = reg->second;
      } else {
        r.name = key;  // with its arguments (e.g. "amp/matmul_ceiling/fp32/device:cpu/256")
        r.device = reg ? reg->second : "cpu";
      }
      r.unit = benchmark::GetTimeUnitString(run.time_unit);
      it = index.emplace(key, out.size()).first;
      out.push_back(std::move(r));
    }
    BenchmarkRecord& rec = out[it->second];
    rec.samples.push_back(run.GetAdjustedRealTime());
    rec.cpu_samples.push_back(run.GetAdjustedCPUTime());
    // User counters as Google Benchmark reports them (rates already divided by the time).
    for (const auto& [counter, value] : run.counters) rec.counters[counter].samples.push_back(value.value);
  }
  for (BenchmarkRecord& r : out) {
    r.median = stats::median(r.samples);
    r.cv = stats::coefficient_of_variation(r.samples);
    for (auto& [counter, c] : r.counters) c.median = stats::median(c.samples);
  }
  return out;
}

CollectingReporter::CollectingReporter(std::unique_ptr<benchmark::BenchmarkReporter> display)
    : display_(std::move(display)) {}

bool CollectingReporter::ReportContext(const Context& context) {
  display_->SetOutputStream(&GetOutputStream());
  display_->SetErrorStream(&GetErrorStream());
  return display_->ReportContext(context);
}

void CollectingReporter::ReportRuns(const std::vector<Run>& runs) {
  display_->ReportRuns(runs);
  runs_.insert(runs_.end(), runs.begin(), runs.end());
}

void CollectingReporter::Finalize() { display_->Finalize(); }

void merge_benchmarks(std::vector<BenchmarkRecord>& into, const std::vector<BenchmarkRecord>& from) {
  for (const BenchmarkRecord& b : from) {
    auto it = std::find_if(into.begin(), into.end(), [&](const BenchmarkRecord& x) {
      return x.name == b.name && x.device == b.device;
    });
    if (it != into.end()) *it = b;
    else into.push_back(b);
  }
}

}  // namespace tc::bench
