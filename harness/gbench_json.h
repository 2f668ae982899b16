// Google Benchmark JSON (`--benchmark_out=FILE --benchmark_format=json`, with
// `--benchmark_repetitions=N`) read as a torchconform Report, so `compare` can gate any benchmark.
// Only the per-repetition entries (run_type "iteration") count: grouped by run_name, the value is
// real_time in its time_unit; items_per_second / bytes_per_second become extra throughput records
// (`<run_name>/items_per_second`, unit items/s or B/s); the other numeric fields of an entry are its
// user counters (state.counters), kept per repetition in BenchmarkRecord::counters. Aggregates (mean, median, ...) and entries
// that report an error are left out. The context becomes the environment (date and load average,
// which change every run, are dropped).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "harness/contract/record.h"

namespace tc {

bool looks_like_google_benchmark(const nlohmann::json& j);
// Throws ReportFormatError for a document without per-repetition entries or with malformed ones.
Report report_from_google_benchmark(const nlohmann::json& j);
// Reads either kind of file; throws ReportFormatError with a sentence that names the file.
Report read_comparable_file(const std::string& path);

}  // namespace tc
