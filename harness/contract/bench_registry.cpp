#include "harness/contract/bench_registry.h"

#include <map>
#include <stdexcept>

namespace tc::bench {
namespace {

// Google Benchmark function name -> (name, device), filled by add() during static registration.
std::map<std::string, std::pair<std::string, std::string>>& registered() {
  static std::map<std::string, std::pair<std::string, std::string>> m;
  return m;
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
  return benchmark::RegisterBenchmark(gname.c_str(), [fn = std::move(fn)](benchmark::State& s) { fn(s); });
}

std::optional<std::pair<std::string, std::string>> registered_as(const std::string& function_name) {
  auto it = registered().find(function_name);
  if (it == registered().end()) return std::nullopt;
  return it->second;
}

}  // namespace tc::bench
