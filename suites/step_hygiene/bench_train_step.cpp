// Benchmark: one training step of the reference recipe on CPU (forward, backward, clip, SGD
// step, scheduler step, next batch from the loader), timed by Google Benchmark.
//
// Runs single-threaded (at::set_num_threads(1), restored after): on a shared machine a busy core
// makes LibTorch's multi-threaded kernels wait on each other and the step time jumps by 100x
// (seen here: 2 ms -> 200 ms while a compiler ran); one thread keeps the figure comparable
// between runs. TORCHCONFORM_BENCH_THREADS=N measures with N threads instead.
//
// Test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N sleeps N ms inside the timed region of every step;
// N may have decimals (0.2: 200 us, a regression of a few percent of a step of a few ms; the sleep
// lasts at least that long, longer by the kernel's timer slack and, on a busy machine, the wait for
// a core). It exists only to demonstrate and test the regression gates (`bench` twice, once
// slowed, then `compare`; `ab --new-env`); never set it in a real measurement.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/Parallel.h>

#include "harness/contract/bench_registry.h"
#include "reference/reference_run.h"

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::max(0, std::atoi(v)) : fallback;
}

// The hook in whole microseconds (0 when unset, empty, not a number or not positive).
long slowdown_us() {
  const char* v = std::getenv("TORCHCONFORM_BENCH_SLOWDOWN_MS");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const double ms = std::strtod(v, &end);
  return end != v && ms > 0 && ms < 1e6 ? std::lround(ms * 1000.0) : 0;
}

void train_step_cpu(benchmark::State& state) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(std::max(1, env_int("TORCHCONFORM_BENCH_THREADS", 1)));
  tc::ref::ReferenceRun run;
  run.setup(tc::RunOptions{});
  run.train_step();  // warm-up: first-touch allocations, loader start
  const long slow = slowdown_us();
  if (slow > 0) state.SetLabel(std::string("TORCHCONFORM_BENCH_SLOWDOWN_MS=") + std::getenv("TORCHCONFORM_BENCH_SLOWDOWN_MS"));
  for (auto _ : state) {
    benchmark::DoNotOptimize(run.train_step().loss);
    if (slow > 0) std::this_thread::sleep_for(std::chrono::microseconds(slow));
  }
  state.counters["threads"] = at::get_num_threads();
  at::set_num_threads(threads_before);
}

auto* const kTrainStep =
    tc::bench::add("reference/train_step", "cpu", train_step_cpu)->Unit(benchmark::kMillisecond);

}  // namespace
