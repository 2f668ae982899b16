#include "suites/support/kit.h"

namespace tc {

void Findings::held(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "held", evidence});
}

void Findings::broken(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "broken", evidence});
}

void Findings::recorded(const std::string& promise, const std::string& evidence) {
  entries_.push_back({promise, "recorded", evidence});
}

bool Findings::any_broken() const {
  for (const Entry& e : entries_) {
    if (e.status == "broken") return true;
  }
  return false;
}

CheckResult Findings::result(const std::string& head) const {
  nlohmann::json metrics = metrics_;
  nlohmann::json promises = nlohmann::json::array();
  for (const Entry& e : entries_) {
    promises.push_back({{"id", e.promise}, {"status", e.status}, {"evidence", e.evidence}});
  }
  metrics["promises"] = promises;
  std::string ev = head;
  const bool failed = any_broken();
  // Failing: each broken promise first ("- "), then what held ("  held: "). Passing: what held.
  for (const Entry& e : entries_) {
    if (e.status == "broken") ev += (ev.empty() ? "" : "\n") + std::string("- ") + e.evidence;
  }
  for (const Entry& e : entries_) {
    if (e.status == "broken") continue;
    ev += (ev.empty() ? "" : "\n") + std::string(failed ? "  held: " : "") + e.evidence;
  }
  return failed ? CheckResult::fail(ev, metrics) : CheckResult::pass(ev, metrics);
}

}  // namespace tc
