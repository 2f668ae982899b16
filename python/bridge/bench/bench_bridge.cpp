// Benchmarks of the Python bridge (docs/python.md, "Speed"), run by `torchconform bench` beside the
// C++ reference's step (reference/train_step, suites/step_hygiene/bench_train_step.cpp):
//
//   python/train_step        one training step of py_reference (python/reference/reference.py)
//                            through PythonRun: the C++ reference's data, model, batch (16),
//                            optimizer, schedule and loader, written in Python. One bridge crossing
//                            a step: the check's train_step() call; the step's work is Python's.
//   python/bridge_call       PythonRun::steps_per_epoch() of py_reference: a trivial call through
//                            the bridge (GIL taken and released, the method looked up, called, its
//                            int converted, Python errors translated).
//   python/bridge_call_step  PythonRun::train_step() of a stub whose train_step returns a record it
//                            made once (bridge_bench_stub.py): the crossing a step makes, the
//                            StepRecord's conversion included.
//
// Counters of the two call benchmarks (the report keeps each counter's median over repetitions):
//   python_ns          the same call made from a Python loop (obj.method() in a for loop, the empty
//                      loop taken out), timed in this process after the benchmark's own loop
//   held_gil_ns        the same call through pybind11 with the GIL held across the whole loop: no
//                      GIL round trip, no error translation, no result conversion (where it goes)
//   gil_ns             one GIL round trip alone, as each bridge call makes it (gil_scoped_acquire)
//   overhead_ns        the bridge's own cost per call: this benchmark's time per call - python_ns
//   cpp_step_us        the C++ reference's step (the registered recipe "reference", what
//                      reference/train_step measures), timed once per process: 8 epochs of 6 steps
//                      after one warm-up step, the fastest epoch's mean step, on the same thread
//                      count (the fastest: a busy machine slows some epochs; the smaller the
//                      denominator, the larger the fraction below, so it errs against the bridge)
//   crossings_per_step 1: a step of a Python recipe is one call, train_step()
//   overhead_of_step   crossings_per_step * overhead_ns / cpp_step: the bridge's cost as a
//                      fraction of a C++ reference step (the target: <= 0.05)
//
// Like reference/train_step they run single-threaded (TORCHCONFORM_BENCH_THREADS=N: N threads): the
// Python torch is this process's LibTorch, so one setting holds for both. A binary whose bridge
// cannot start (no venv) skips them with the reason.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>

#include "harness/contract/bench_registry.h"
#include "harness/contract/registry.h"
#include "harness/contract/run.h"
#include "python/bridge/build_paths.h"
#include "python/bridge/interpreter.h"
#include "python/bridge/loader.h"
#include "python/bridge/python_run.h"

namespace py = pybind11;

namespace tc::python {
namespace {

const std::string kReferenceSpec = std::string(build_paths::reference_file()) + ":PythonReference";
const std::string kStubSpec = std::string(build_paths::bench_stub_file()) + ":BridgeBenchStub";
constexpr const char* kStubModule = "bridge_bench_stub";  // the stub file's stem: its module's name
constexpr double kCrossingsPerStep = 1.0;                  // train_step(): the one call of a step

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

int bench_threads() {
  const char* v = std::getenv("TORCHCONFORM_BENCH_THREADS");
  return v && *v ? std::max(1, std::atoi(v)) : 1;
}

// The benchmark's intra-op thread count for its scope (as reference/train_step does), restored after.
class ThreadScope {
 public:
  ThreadScope() : before_(at::get_num_threads()) { at::set_num_threads(bench_threads()); }
  ~ThreadScope() { at::set_num_threads(before_); }
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int before_;
};

// A Python recipe's factory, its file loaded once per process (into a registry of its own: the
// benchmarks register no recipe with the run matrix); `error` says why not where it cannot load.
struct Loaded {
  RunFactory make;
  std::string error;
};

const Loaded& load(const std::string& spec) {
  static std::mutex mutex;
  static std::map<std::string, Loaded> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(spec);
  if (it != cache.end()) return it->second;
  Loaded l;
  try {
    Registry registry;
    const PythonRecipe r = load_python_recipe(spec, registry);
    l.make = registry.find_recipe(r.name)->make;
  } catch (const std::exception& e) {
    l.error = e.what();
  }
  return cache.emplace(spec, std::move(l)).first->second;
}

// The recipe `spec` names, made (not set up); nullptr after skipping `state` with the reason.
std::unique_ptr<Run> make_or_skip(benchmark::State& state, const std::string& spec) {
  const Loaded& l = load(spec);
  if (!l.make) {
    state.SkipWithError(("skipped: " + l.error).c_str());
    return nullptr;
  }
  return l.make();
}

// The C++ reference's step in microseconds, timed once per process (see the counters above); 0
// where this binary has no recipe "reference" or it failed (`why` says which).
struct CppStep {
  double us = 0.0;
  std::string why;
};

const CppStep& cpp_reference_step() {
  static const CppStep step = [] {
    CppStep s;
    const RecipeInfo* info = Registry::global().find_recipe("reference");
    if (info == nullptr) {
      s.why = "no recipe 'reference' in this binary";
      return s;
    }
    ThreadScope threads;
    try {
      std::unique_ptr<Run> run = info->make();
      run->setup(RunOptions{});
      run->train_step();  // warm-up, as reference/train_step
      const int64_t per_epoch = std::max<int64_t>(1, run->steps_per_epoch());
      std::vector<double> epoch_means;
      for (int e = 0; e < 8; ++e) {
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < per_epoch; ++i) benchmark::DoNotOptimize(run->train_step().loss);
        epoch_means.push_back(ns_since(t0) / 1000.0 / static_cast<double>(per_epoch));
      }
      s.us = *std::min_element(epoch_means.begin(), epoch_means.end());
    } catch (const std::exception& e) {
      s.why = std::string("the C++ reference failed: ") + e.what();
    }
    return s;
  }();
  return step;
}

// Python's own time for obj.method(), and pybind11's with the GIL held throughout, per call (ns).
double python_ns(const py::object& obj, const char* method, int64_t calls) {
  py::gil_scoped_acquire gil;
  return py::module_::import(kStubModule).attr("ns_per_call")(obj, method, calls).cast<double>();
}

double held_gil_ns(const py::object& obj, const char* method, int64_t calls) {
  py::gil_scoped_acquire gil;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) {
    py::object r = obj.attr(method)();
    benchmark::DoNotOptimize(r.ptr());
  }
  return ns_since(t0) / static_cast<double>(calls);
}

// One GIL round trip as the bridge makes it (pybind11::gil_scoped_acquire from a thread that holds
// no Python thread state), per call (ns).
double gil_ns(int64_t calls) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < calls; ++i) {
    py::gil_scoped_acquire gil;
    benchmark::ClobberMemory();
  }
  return ns_since(t0) / static_cast<double>(calls);
}

// The counters of a call benchmark that called `method` `state.iterations()` times in `bridge_ns`.
void call_counters(benchmark::State& state, const py::object& obj, const char* method, double bridge_ns_total) {
  const int64_t iterations = std::max<int64_t>(1, state.iterations());
  const double bridge_ns = bridge_ns_total / static_cast<double>(iterations);
  // As many calls as the benchmark made (within bounds: enough to time, few enough to be quick).
  const int64_t calls = std::clamp<int64_t>(iterations, 10000, 2000000);
  const double py_ns = python_ns(obj, method, calls);
  const double overhead = bridge_ns - py_ns;
  state.counters["python_ns"] = py_ns;
  state.counters["held_gil_ns"] = held_gil_ns(obj, method, calls);
  state.counters["gil_ns"] = gil_ns(calls);
  state.counters["overhead_ns"] = overhead;
  state.counters["crossings_per_step"] = kCrossingsPerStep;
  const CppStep& cpp = cpp_reference_step();
  if (cpp.us > 0) {
    const double fraction = kCrossingsPerStep * overhead / (cpp.us * 1000.0);
    state.counters["cpp_step_us"] = cpp.us;
    state.counters["overhead_of_step"] = fraction;
    char label[160];
    std::snprintf(label, sizeof label, "bridge %.0f ns/call over Python's %.0f; x%.0f/step = %.3f%% of the C++ step",
                  overhead, py_ns, kCrossingsPerStep, 100.0 * fraction);
    state.SetLabel(label);
  } else {
    state.SetLabel(("no C++ step to compare with: " + cpp.why).c_str());
  }
}

void python_train_step(benchmark::State& state) {
  ThreadScope threads;
  std::unique_ptr<Run> run = make_or_skip(state, kReferenceSpec);
  if (!run) return;
  try {
    run->setup(RunOptions{});
    run->train_step();  // warm-up: first-touch allocations, the loader's workers started
  } catch (const std::exception& e) {
    state.SkipWithError((std::string("py_reference: ") + e.what()).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(run->train_step().loss);
  state.counters["threads"] = at::get_num_threads();
  state.counters["crossings_per_step"] = kCrossingsPerStep;
}

void python_bridge_call(benchmark::State& state) {
  std::unique_ptr<Run> run = make_or_skip(state, kReferenceSpec);
  if (!run) return;
  if (!load(kStubSpec).make) {  // ns_per_call lives in the stub's module
    state.SkipWithError(("skipped: " + load(kStubSpec).error).c_str());
    return;
  }
  auto* python_run = dynamic_cast<PythonRun*>(run.get());
  if (python_run == nullptr) throw std::logic_error("py_reference is not a PythonRun");
  run->steps_per_epoch();  // warm-up (no setup needed: py_reference's answer is a constant)
  const auto t0 = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(run->steps_per_epoch());
  const double total = ns_since(t0);
  ThreadScope threads;  // for cpp_reference_step's first measurement
  call_counters(state, python_run->object(), "steps_per_epoch", total);
}

void python_bridge_call_step(benchmark::State& state) {
  std::unique_ptr<Run> run = make_or_skip(state, kStubSpec);
  if (!run) return;
  auto* python_run = dynamic_cast<PythonRun*>(run.get());
  if (python_run == nullptr) throw std::logic_error("the stub is not a PythonRun");
  run->setup(RunOptions{});
  run->train_step();
  const auto t0 = Clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(run->train_step().loss);
  const double total = ns_since(t0);
  ThreadScope threads;
  call_counters(state, python_run->object(), "train_step", total);
}

TC_BENCHMARKS() {
  tc::bench::add("python/train_step", "cpu", python_train_step)->Unit(benchmark::kMillisecond);
  tc::bench::add("python/bridge_call", "cpu", python_bridge_call)->Unit(benchmark::kNanosecond);
  tc::bench::add("python/bridge_call_step", "cpu", python_bridge_call_step)->Unit(benchmark::kNanosecond);
}

}  // namespace
}  // namespace tc::python
