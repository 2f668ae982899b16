// Benchmark registration: how a suite adds a Google Benchmark that `torchconform bench` runs and
// folds into the report. The runner side (reporter, records) is the harness core's (bench.h).
//
//   tc::bench::add("train_step", "cpu", [](benchmark::State& s) { ... })->Unit(benchmark::kMillisecond);
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
