#include "harness/contract/bench_registry.h"

#include <map>
#include <stdexcept>
#include <vector>

namespace tc::bench {
namespace {

// Google Benchmark function name -> (name, device), filled by add() during static registration.
std::map<std::string, std::pair<std::string, std::string>>& registered() {
  static std::map<std::string, std::pair<std::string, std::string>> m;
  return m;
}

std::vector<benchmark::internal::Benchmark*>& builders() {
  static std::vector<benchmark::internal::Benchmark*> v;
  return v;
}

struct Hooks {
  std::function<bool(benchmark::State&)> before;
  std::function<void()> after;
};
Hooks& hooks() {
  static Hooks h;
  return h;
}

}  // namespace

std::string gbench_name(const std::string& name, const std::string& device) {
  return name + "/device:" + device;
}

benchmark::internal::Benchmark* add(const std::string& name, const std::string& device,
                                    std::function<void(benchmark::State&)> fn) {
  const std::string gname = gbench_name(name, device);
  if (!registered().emplace(gname, std::make_pair(name, device)).second) {
    throw std::logic_error("benchmark '" + name + "' on '" + device + "' is registered twice");
  }
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(gname.c_str(), [fn = std::move(fn)](benchmark::State& s) {
        const Hooks& h = hooks();
        const bool hooked = s.thread_index() == 0;
        if (hooked && h.before && !h.before(s)) return;
        fn(s);
        if (hooked && h.after) h.after();
      });
  builders().push_back(b);
  return b;
}

void set_invocation_hooks(std::function<bool(benchmark::State&)> before, std::function<void()> after) {
  hooks() = Hooks{std::move(before), std::move(after)};
}

void set_fixed_iterations(benchmark::IterationCount n) {
  for (benchmark::internal::Benchmark* b : builders()) b->Iterations(n);
}

std::optional<std::pair<std::string, std::string>> registered_as(const std::string& function_name) {
  auto it = registered().find(function_name);
  if (it == registered().end()) return std::nullopt;
  return it->second;
}

}  // namespace tc::bench
