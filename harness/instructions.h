// Instructions executed per benchmark iteration, counted by simulation under Valgrind's callgrind
// (`bench --measure instructions`, `ab --time instructions`; docs/benchmarks-and-gating.md).
//
// Why: on a shared machine a step's real and CPU time move by tens of percent with the other jobs;
// the instructions a single-threaded step executes do not (the same build, seed and inputs run the
// same instructions, whatever else the machine does). The machines this runs on expose no hardware
// counters, so Valgrind counts them: about 50-100x slower, hence few iterations.
//
// How (one process, the benchmark's own binary, started under valgrind by wrap_argv()):
//  - `--instr-atstart=no`: LibTorch's start-up runs uninstrumented (fast); the first repetition's
//    invocation hook switches instrumentation on (CALLGRIND_START_INSTRUMENTATION).
//  - `--zero-before=benchmark::State::StartKeepRunning*` and
//    `--dump-before=benchmark::State::FinishKeepRunning*`: callgrind zeroes its counts when the
//    timed loop starts and writes them out when it ends, so a dump holds exactly the timed region
//    (the set-up before the loop is left out, as from the times); oneDNN's JIT code included
//    (`--smc-check=all-non-file`: code written into anonymous memory is re-translated when
//    rewritten).
//  - `--separate-threads=yes`, and only the benchmark's own thread is read: the reference step's
//    loader worker prefetches batches at whatever pace the scheduler gives it, so the instructions
//    all threads execute within two steps varied by +-7% between repetitions (seen here), while
//    the benchmark's thread's did not. The work of other threads (loader workers, intra-op
//    threads if any) is not counted: their time is the time benchmarks' to judge.
//  - after each repetition, the hook reads that dump's totals ("events:" and "summary:") and sets
//    the counter `instructions` = Ir / iterations on the benchmark's State: the report's
//    counters.instructions, one sample per repetition.
//  - simulated cache misses (`--cache-sim=yes`, a fixed cache, not this CPU's: I1 and D1 32 KiB,
//    8-way, LL 8 MiB, 16-way, 64-byte lines), per iteration beside them: `l1_misses` (I1mr + D1mr
//    + D1mw) and `ll_misses` (ILmr + DLmr + DLmw). Reported, never gating: they depend on what ran
//    before on the thread (instrumentation stays on across repetitions, so the first repetition
//    starts cold and the others warm), and a working set smaller than the LL leaves `ll_misses`
//    near zero and noisy. The simulation adds about 14% to the CPU time of a counting run of
//    reference/train_step (6 repetitions: 43.7 s -> 49.7 s, docs/benchmarks-and-gating.md).
// What instruction counts cannot see: memory-bound effects (cache misses, bandwidth), threading
// (lock waits, an idle core), I/O and sleeps, and GPU kernels; and Valgrind's simulated CPU offers
// no AVX-512, so LibTorch and oneDNN run their AVX2 (or older) kernels under it. Keep the times
// beside the counts.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tc::instructions {

// The environment variable that names the dump directory inside the counted child.
inline constexpr const char* kDumpDirVar = "TORCHCONFORM_CALLGRIND_DIR";
// The counter a counted repetition sets: instructions per iteration.
inline constexpr const char* kCounter = "instructions";
// Simulated cache misses per iteration (reported beside the counts, not gating): the counters and
// the unit a row of theirs is shown in.
inline constexpr const char* kL1Misses = "l1_misses";
inline constexpr const char* kLLMisses = "ll_misses";
struct CacheMissCounter {
  const char* counter;
  const char* unit;
};
inline constexpr CacheMissCounter kCacheMisses[] = {{kL1Misses, "L1 misses"}, {kLLMisses, "LL misses"}};
// The gates' default threshold on instruction counts (ab --time instructions, compare, trend): the
// counts of identical builds differ by about 0.1% (the benchmark's thread waiting a little more or
// less for its loader), measured in docs/benchmarks-and-gating.md; 0.5% is five times that.
inline constexpr double kDefaultThreshold = 0.005;

// Whether this process runs under Valgrind (RUNNING_ON_VALGRIND); false when built without
// Valgrind's headers.
bool on_valgrind();
// Whether this build can count (built with valgrind/callgrind.h).
bool supported();

// The valgrind program: $TORCHCONFORM_VALGRIND, else `valgrind` on PATH; empty when none.
std::string find_valgrind();
// `valgrind --version` ("valgrind-3.19.0"); empty when it cannot be run.
std::string valgrind_version(const std::string& valgrind);

// callgrind's options for a child that writes its dumps into dump_dir.
std::vector<std::string> callgrind_options(const std::string& dump_dir);
// valgrind + callgrind_options + argv.
std::vector<std::string> wrap_argv(const std::string& valgrind, const std::string& dump_dir,
                                   const std::vector<std::string>& argv);
// What a counted child's environment gets: the dump directory, and one thread for LibTorch and
// OpenMP (one thread's instructions are deterministic; several threads' spin-waits are not).
std::vector<std::pair<std::string, std::string>> child_env(const std::string& dump_dir);

// environment.valgrind of a report that carries counts.
nlohmann::json environment_block(const std::string& valgrind, long long iterations, int repetitions);

// A callgrind dump's totals by event name (its "events:" and "summary:" lines: Ir, and with the
// cache simulation Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw); empty when the file has none.
std::map<std::string, double> read_dump_events(const std::string& path);
// The counters one counted repetition sets from a dump's totals, per iteration: `instructions`,
// and `l1_misses` / `ll_misses` where the dump has the cache events. Empty without Ir.
std::map<std::string, double> counters_per_iteration(const std::map<std::string, double>& events,
                                                     long long iterations);

// In the counted child (on_valgrind() and kDumpDirVar set): installs the invocation hooks that
// switch instrumentation on and set each repetition's `instructions` counter. Throws
// std::runtime_error when the dump directory is not set or this build cannot count. Removing the
// hooks (destructor) switches instrumentation off.
class Counter {
 public:
  Counter();
  ~Counter();
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;
  int counted() const { return counted_; }

 private:
  std::string dir_;
  int counted_ = 0;
};

}  // namespace tc::instructions
