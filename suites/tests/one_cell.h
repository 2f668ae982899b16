// Test support for the checks' own tests: run one registered check on one recipe (registered, or a
// test-only one) on the CPU through the runner, and read a promise's status off the cell.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "harness/contract/registry.h"
#include "harness/runner.h"

namespace tc::test_support {

// `make` given: a test-only recipe named `recipe` (a subject, no expectations); else the registered one.
inline Cell run_one(const std::string& check, const std::string& recipe, RunFactory make = nullptr) {
  Registry reg;
  reg.add_check(*Registry::global().find_check(check));
  if (make) {
    reg.add_recipe({recipe, "test-only recipe", {}, std::move(make), __FILE__, __LINE__});
  } else {
    reg.add_recipe(*Registry::global().find_recipe(recipe));
  }
  RunPlan plan;
  plan.devices = {{"cpu", true, ""}};
  plan.checks = {check};
  plan.seed = 11;
  auto cells = run_cells(reg, plan);
  if (cells.size() != 1) throw std::runtime_error("expected one cell");
  return cells[0];
}

// The statuses metrics.promises gives `promise` ("held", "broken", "recorded"; comma-joined when it
// appears more than once, e.g. per dtype); "" when absent.
inline std::string status(const Cell& c, const std::string& promise) {
  std::string s;
  if (!c.metrics.contains("promises")) return s;
  for (const auto& p : c.metrics["promises"]) {
    if (p.value("id", "") != promise) continue;
    if (!s.empty()) s += ',';
    s += p.value("status", std::string());
  }
  return s;
}

}  // namespace tc::test_support
