// Benchmark: one training step of the reference recipe on CPU (forward, backward, clip, SGD
// step, scheduler step, next batch from the loader), timed by Google Benchmark.
//
// Test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N sleeps N ms inside the timed region of every step.
// It exists only to demonstrate and test the regression gate (`bench` twice, once slowed, then
// `compare`); never set it in a real measurement.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "harness/bench.h"
#include "reference/reference_run.h"

namespace {

int slowdown_ms() {
  const char* v = std::getenv("TORCHCONFORM_BENCH_SLOWDOWN_MS");
  return v ? std::max(0, std::atoi(v)) : 0;
}

void train_step_cpu(benchmark::State& state) {
  tc::ref::ReferenceRun run;
  run.setup(tc::RunOptions{});
  run.train_step();  // warm-up: first-touch allocations, loader start
  const int slow = slowdown_ms();
  if (slow > 0) state.SetLabel("TORCHCONFORM_BENCH_SLOWDOWN_MS=" + std::to_string(slow));
  for (auto _ : state) {
    benchmark::DoNotOptimize(run.train_step().loss);
    if (slow > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow));
  }
}

auto* const kTrainStep =
    tc::bench::add("reference/train_step", "cpu", train_step_cpu)->Unit(benchmark::kMillisecond);

}  // namespace
