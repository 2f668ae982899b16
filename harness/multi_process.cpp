#include "harness/multi_process.h"

#include <cstdlib>
#include <mutex>
#include <set>

namespace tc {
namespace {
std::set<std::string>& marked() {
  static std::set<std::string> s;
  return s;
}
}  // namespace

void mark_multi_process_check(const std::string& check) { marked().insert(check); }
bool is_multi_process_check(const std::string& check) { return marked().count(check) > 0; }

bool under_torchrun() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

int torchrun_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

}  // namespace tc
