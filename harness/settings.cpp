#include "harness/settings.h"

#include <cstdlib>
#include <exception>
#include <string>

#include "harness/contract/registry.h"

namespace tc {

int env_positive_int(const char* name, int fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return fallback;
  const std::string v(raw);
  try {
    size_t used = 0;
    const int n = std::stoi(v, &used);
    if (used == v.size() && n > 0) return n;
  } catch (const std::exception&) {
  }
  throw HarnessError(std::string(name) + "='" + v + "' is not a positive whole number");
}

}  // namespace tc
