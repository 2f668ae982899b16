// What a fork of a process that holds LibTorch (its CPU and CUDA libraries, as the torchconform
// binary does) costs: fork(), the child's _exit, waitpid, in wall time per fork, as the process is
// loaded (`fork/as_loaded`, run first) and after forking::prepare_to_fork() (`fork/prepared`), which
// every fork of the project that keeps the process's memory calls first (a recipe's process, a
// kill trial of checkpoint_safety, a bounded parse of a checkpoint). Counters: the process's
// anonymous memory and how much of it is in 2 MiB pages, MiB.
//
//   build/tc_fork_bench --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
//
// A benchmark, not a test: CTest's bench.fork_cost runs it briefly and fails where a fork or its
// child failed; what prepare_to_fork changes in the memory is tested by PrepareToFork.*.
//
// (The order matters: `prepared` cannot be undone in a process, so `as_loaded` runs first.)
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>

#include "harness/util/forking.h"
#include "harness/util/posix_fs.h"

namespace {

// A field of a /proc/self file in MiB ("RssAnon" of status, "AnonHugePages" of smaps_rollup); -1
// where it cannot be read.
double proc_mib(const char* file, const char* field) {
  const long kib = tc::posix_fs::proc_kib(file, field);
  return kib < 0 ? -1.0 : static_cast<double>(kib) / 1024.0;
}

void fork_and_wait(benchmark::State& state, bool prepared) {
  benchmark::DoNotOptimize(at::get_num_threads());  // LibTorch is loaded and initialised
  if (prepared) tc::forking::prepare_to_fork();  // its first call maps; later ones find nothing grown
  for (auto _ : state) {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid < 0) {
      state.SkipWithError("fork failed");
      break;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      state.SkipWithError("the forked child did not exit with status 0");  // CTest's bench.fork_cost fails on it
      break;
    }
  }
  state.counters["anon_mib"] = proc_mib("/proc/self/status", "RssAnon");
  state.counters["huge_mib"] = proc_mib("/proc/self/smaps_rollup", "AnonHugePages");
}

}  // namespace

BENCHMARK_CAPTURE(fork_and_wait, as_loaded, false)->Name("fork/as_loaded")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(fork_and_wait, prepared, true)->Name("fork/prepared")->UseRealTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
