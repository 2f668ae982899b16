#include "harness/instructions.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <stdexcept>

#include <benchmark/benchmark.h>

#include "harness/contract/bench_registry.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define TC_HAVE_CALLGRIND 1
#else
#define TC_HAVE_CALLGRIND 0
#endif

namespace tc::instructions {
namespace {

struct Dump {
  long seq = 0;     // the dump's number (1, 2, ... in the order written)
  int thread = 0;   // Valgrind's thread number (1: the main thread)
  std::string path;
};

// The dumps callgrind wrote into dir with --separate-threads=yes: "callgrind.out.<pid>.<n>-<tt>"
// (the one at exit, "callgrind.out.<pid>-<tt>", has no <n> and is left out); newest first.
std::vector<Dump> dumps_in(const std::string& dir) {
  std::vector<Dump> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const std::string prefix = "callgrind.out.";
    if (name.rfind(prefix, 0) != 0) continue;
    long pid = 0, seq = 0;
    int thread = 0, used = 0;
    if (std::sscanf(name.c_str() + prefix.size(), "%ld.%ld-%d%n", &pid, &seq, &thread, &used) != 3 ||
        prefix.size() + static_cast<size_t>(used) != name.size()) {
      continue;
    }
    out.push_back({seq, thread, dir + "/" + name});
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const Dump& a, const Dump& b) { return a.seq > b.seq; });
  return out;
}

benchmark::State* g_current = nullptr;

}  // namespace

bool supported() { return TC_HAVE_CALLGRIND != 0; }

bool on_valgrind() {
#if TC_HAVE_CALLGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

std::string find_valgrind() {
  if (const char* v = std::getenv("TORCHCONFORM_VALGRIND"); v != nullptr && *v != '\0') return v;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t colon = p.find(':', start);
    const std::string dir = p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/valgrind";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return "";
}

std::string valgrind_version(const std::string& valgrind) {
  if (valgrind.empty()) return "";
  const std::string cmd = "'" + valgrind + "' --version 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return "";
  char buf[128] = {0};
  std::string out;
  if (std::fgets(buf, sizeof buf, f) != nullptr) out = buf;
  pclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::vector<std::string> callgrind_options(const std::string& dump_dir) {
  return {"--tool=callgrind",
          "--instr-atstart=no",
          "--zero-before=benchmark::State::StartKeepRunning*",
          "--dump-before=benchmark::State::FinishKeepRunning*",
          "--separate-threads=yes",
          "--smc-check=all-non-file",
          "--cache-sim=yes",
          "--I1=32768,8,64",
          "--D1=32768,8,64",
          "--LL=8388608,16,64",
          "--dump-line=no",
          "--dump-instr=no",
          "--compress-strings=no",
          "--callgrind-out-file=" + dump_dir + "/callgrind.out.%p"};
}

std::vector<std::string> wrap_argv(const std::string& valgrind, const std::string& dump_dir,
                                   const std::vector<std::string>& argv) {
  std::vector<std::string> out{valgrind, "--quiet"};
  for (std::string& o : callgrind_options(dump_dir)) out.push_back(std::move(o));
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> child_env(const std::string& dump_dir) {
  return {{kDumpDirVar, dump_dir},
          {"OMP_NUM_THREADS", "1"},
          {"MKL_NUM_THREADS", "1"},
          {"TORCHCONFORM_THREADS", "1"},
          {"TORCHCONFORM_BENCH_THREADS", "1"}};
}

nlohmann::json environment_block(const std::string& valgrind, long long iterations, int repetitions) {
  std::vector<std::string> options = callgrind_options("DIR");
  options.back() = "--callgrind-out-file=<scratch>/callgrind.out.%p";
  return {{"version", valgrind_version(valgrind)},
          {"program", valgrind},
          {"options", options},
          {"threads", "LibTorch and OpenMP: 1; counted: the benchmark's own thread"},
          {"iterations", iterations},
          {"repetitions", repetitions},
          {"counter", std::string(kCounter) + " (per iteration, the timed loop only)"},
          {"cache", std::string(kL1Misses) + ", " + kLLMisses +
                        " (per iteration, not gating): a simulated cache, the same on every machine (I1 and D1 32 KiB "
                        "8-way, LL 8 MiB 16-way, 64-byte lines), not this CPU's"}};
}

std::map<std::string, double> read_dump_events(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> names;
  std::map<std::string, double> out;
  while (std::getline(in, line)) {
    if (line.rfind("events:", 0) == 0) {
      names.clear();
      std::istringstream words(line.substr(7));
      for (std::string w; words >> w;) names.push_back(w);
    } else if (line.rfind("summary:", 0) == 0) {
      const char* p = line.c_str() + 8;
      for (const std::string& name : names) {
        char* end = nullptr;
        const double v = std::strtod(p, &end);
        if (end == p) break;
        out[name] = v;
        p = end;
      }
      return out;
    }
  }
  return out;
}

std::map<std::string, double> counters_per_iteration(const std::map<std::string, double>& events,
                                                     long long iterations) {
  std::map<std::string, double> out;
  auto ir = events.find("Ir");
  if (ir == events.end() || iterations < 1) return out;
  const double n = static_cast<double>(iterations);
  out[kCounter] = ir->second / n;
  auto sum = [&](std::initializer_list<const char*> names) -> std::optional<double> {
    double total = 0.0;
    for (const char* e : names) {
      auto it = events.find(e);
      if (it == events.end()) return std::nullopt;
      total += it->second;
    }
    return total;
  };
  if (auto l1 = sum({"I1mr", "D1mr", "D1mw"})) out[kL1Misses] = *l1 / n;
  if (auto ll = sum({"ILmr", "DLmr", "DLmw"})) out[kLLMisses] = *ll / n;
  return out;
}

Counter::Counter() {
  const char* dir = std::getenv(kDumpDirVar);
  if (!supported()) throw std::runtime_error("this torchconform was built without Valgrind's headers (valgrind/callgrind.h): it cannot count instructions; install Debian's valgrind package and rebuild");
  if (dir == nullptr || *dir == '\0') {
    throw std::runtime_error(std::string("running under valgrind without ") + kDumpDirVar +
                             ": start `bench --measure instructions` outside valgrind, it starts valgrind itself");
  }
  dir_ = dir;
  for (const Dump& d : dumps_in(dir_)) std::remove(d.path.c_str());
  bench::set_invocation_hooks(
      [](benchmark::State& s) {
        // The first repetition switches instrumentation on (it stays on: switching it flushes
        // every translation, and set-up code would be translated again each repetition).
        static bool started = false;
#if TC_HAVE_CALLGRIND
        if (!started) CALLGRIND_START_INSTRUMENTATION;
#endif
        started = true;
        g_current = &s;
        return true;
      },
      [this] {
        benchmark::State* s = g_current;
        g_current = nullptr;
        const std::vector<Dump> dumps = dumps_in(dir_);
        // The benchmark's own thread: Google Benchmark runs a one-thread benchmark on the thread
        // that called RunSpecifiedBenchmarks, this program's main thread (Valgrind's thread 1).
        std::map<std::string, double> events;
        for (const Dump& d : dumps) {
          if (d.seq == dumps.front().seq && d.thread == 1) events = read_dump_events(d.path);
        }
        for (const Dump& d : dumps) std::remove(d.path.c_str());
        if (s == nullptr) return;  // skipped before its loop: nothing counted
        const std::map<std::string, double> counters = counters_per_iteration(events, s->max_iterations);
        if (counters.empty()) return;
        for (const auto& [name, value] : counters) s->counters[name] = benchmark::Counter(value);
        ++counted_;
      });
}

Counter::~Counter() {
  bench::set_invocation_hooks(nullptr, nullptr);
#if TC_HAVE_CALLGRIND
  CALLGRIND_STOP_INSTRUMENTATION;
#endif
}

}  // namespace tc::instructions
