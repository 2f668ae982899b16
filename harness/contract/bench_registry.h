// Benchmark registration: how a suite adds a Google Benchmark that `torchconform bench` runs and
// folds into the report. The runner side (reporter, records) is the harness core's (bench.h).
//
//   TC_BENCHMARKS() {  // runs once, before main
//     tc::bench::add("train_step", "cpu", [](benchmark::State& s) { ... })->Unit(benchmark::kMillisecond);
//   }
//
// TC_BENCHMARKS is the one way a file registers its benchmarks (loops over sizes or dtypes go in
// its body); Google Benchmark's own BENCHMARK() macro bypasses the device and the turn-taking.
//
// No torch here: the benchmarks themselves live in suites/, next to what they measure.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>

namespace tc::bench {

// Registers `fn` under `name` for `device` (a thin wrapper over benchmark::RegisterBenchmark that
// remembers the device; it returns Google Benchmark's builder, so options chain). A duplicate
// (name, device) throws std::logic_error.
benchmark::internal::Benchmark* add(const std::string& name, const std::string& device,
                                    std::function<void(benchmark::State&)> fn);

// The Google Benchmark name that add() registered for (name, device): "name/device:cpu".
std::string gbench_name(const std::string& name, const std::string& device);

// (name, device) of a Google Benchmark function name that add() registered; nullopt otherwise.
std::optional<std::pair<std::string, std::string>> registered_as(const std::string& function_name);

// For the runner (harness/bench.cpp), not for suites: every benchmark that add() registered runs
// `before` ahead of each invocation of its function (one invocation = one repetition, or one
// step of Google Benchmark's iteration-count estimation) and `after` once it returns, on the
// benchmark's first thread. `before` returning false skips the invocation (it has called
// State::SkipWithError). `ab --pairing repetition` takes turns between two processes this way.
void set_invocation_hooks(std::function<bool(benchmark::State&)> before, std::function<void()> after);

// For the runner: every benchmark that add() registered runs exactly `n` iterations per
// repetition (Benchmark::Iterations: no estimation, so one invocation is one repetition), for the
// rest of the process (Google Benchmark has no way back).
void set_fixed_iterations(benchmark::IterationCount n);

}  // namespace tc::bench

#define TC_BENCH_CONCAT_INNER(a, b) a##b
#define TC_BENCH_CONCAT(a, b) TC_BENCH_CONCAT_INNER(a, b)
// A block of tc::bench::add calls run once at start-up (static initialisation), e.g.
//   TC_BENCHMARKS() { for (int w : {0, 1, 2}) tc::bench::add("loader/" + std::to_string(w), "cpu", ...); }
#define TC_BENCHMARKS()                                                                              \
  static void TC_BENCH_CONCAT(tc_benchmarks_, __LINE__)();                                           \
  [[maybe_unused]] static const bool TC_BENCH_CONCAT(tc_benchmarks_registered_, __LINE__) =          \
      (TC_BENCH_CONCAT(tc_benchmarks_, __LINE__)(), true);                                           \
  static void TC_BENCH_CONCAT(tc_benchmarks_, __LINE__)()
