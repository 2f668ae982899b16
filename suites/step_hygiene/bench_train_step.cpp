// Benchmark: one training step of the reference recipe on CPU (forward, backward, clip, SGD
// step, scheduler step, next batch from the loader), timed by Google Benchmark.
//
// Runs single-threaded (at::set_num_threads(1), restored after): on a shared machine a busy core
// makes LibTorch's multi-threaded kernels wait on each other and the step time jumps by 100x
// (seen here: 2 ms -> 200 ms while a compiler ran); one thread keeps the figure comparable
// between runs. TORCHCONFORM_BENCH_THREADS=N measures with N threads instead.
//
// Test hook: TORCHCONFORM_BENCH_SLOWDOWN_MS=N adds N ms of work to every step inside the timed
// region: a busy loop until this thread has used N ms more CPU time, as a slower kernel would (it
// shows in real time and in CPU time alike, and on a busy machine it waits for a core as the step
// does). N may have decimals (0.2: 200 us, a regression of a few percent of a step of a few ms). It
// exists only to demonstrate and test the regression gates (`bench` twice, once slowed, then
// `compare`; `ab --new-env`); never set it in a real measurement.
//
// Test hook: TORCHCONFORM_BENCH_EXTRA_WORK=N adds a fixed amount of work to every step: N thousand
// rounds of a loop whose instructions do not depend on the machine or its load (a few per round),
// so it adds the same number of instructions every time (`bench --measure instructions`, `ab --time
// instructions`) and the time those take. Measure the change it makes (`ab` prints it as the median
// ratio); never set it in a real measurement.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <time.h>

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

// Busy-waits until the calling thread has used `us` more microseconds of CPU time.
void burn_cpu_us(long us) {
  auto now_us = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<long long>(t.tv_sec) * 1000000LL + t.tv_nsec / 1000;
  };
  const long long until = now_us() + us;
  volatile unsigned sink = 0;
  while (now_us() < until) {
    for (int i = 0; i < 64; ++i) sink = sink + static_cast<unsigned>(i);
  }
}

// The extra-work hook in thousands of loop rounds (0 when unset or not a positive whole number).
long extra_work_rounds() {
  const char* v = std::getenv("TORCHCONFORM_BENCH_EXTRA_WORK");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n > 0 && n < 1000000000L ? n * 1000 : 0;
}

// A fixed number of instructions: the volatile keeps the compiler from folding the loop.
__attribute__((noinline)) void fixed_work(long rounds) {
  volatile unsigned sink = 0;
  for (long i = 0; i < rounds; ++i) sink = sink + static_cast<unsigned>(i);
}

void train_step_cpu(benchmark::State& state) {
  const int threads_before = at::get_num_threads();
  at::set_num_threads(std::max(1, env_int("TORCHCONFORM_BENCH_THREADS", 1)));
  tc::ref::ReferenceRun run;
  run.setup(tc::RunOptions{});
  run.train_step();  // warm-up: first-touch allocations, loader start
  const long slow = slowdown_us();
  if (slow > 0) state.SetLabel(std::string("TORCHCONFORM_BENCH_SLOWDOWN_MS=") + std::getenv("TORCHCONFORM_BENCH_SLOWDOWN_MS"));
  const long extra = extra_work_rounds();
  if (extra > 0) state.SetLabel(std::string("TORCHCONFORM_BENCH_EXTRA_WORK=") + std::getenv("TORCHCONFORM_BENCH_EXTRA_WORK"));
  for (auto _ : state) {
    benchmark::DoNotOptimize(run.train_step().loss);
    if (slow > 0) burn_cpu_us(slow);
    if (extra > 0) fixed_work(extra);
  }
  state.counters["threads"] = at::get_num_threads();
  at::set_num_threads(threads_before);
}

TC_BENCHMARKS() { tc::bench::add("reference/train_step", "cpu", train_step_cpu)->Unit(benchmark::kMillisecond); }

}  // namespace
