// Crosses check x recipe x device into cells and runs them. Makes plain records; formats nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/contract/record.h"
#include "harness/contract/registry.h"
#include "harness/run_plan.h"

namespace tc {

// The check x recipe x device of the selection that plan_cells leaves out: the check judges recipes
// of other languages only (CheckInfo::languages), each with that reason.
std::vector<NotApplicable> not_applicable_cells(const Registry& registry, const RunPlan& plan);

// Throws std::invalid_argument naming an unknown check or recipe in the filters.
std::vector<PlannedCell> plan_cells(const Registry& registry, const RunPlan& plan);

// The record of a planned cell before it runs: check, recipe, device, role, language, expected.
Cell cell_record(const Registry& registry, const PlannedCell& planned);

// Runs one planned cell: never throws; the cell's verdict says what happened.
Cell run_cell(const Registry& registry, const PlannedCell& planned, const RunPlan& plan);

// Whether the cell runs a recipe's code in this process when not isolated (a cell skipped for its
// device, an unsupported check, and a multi-process check's launch, already in torchrun's processes,
// do not).
bool runs_recipe_code(const PlannedCell& planned, const RunPlan& plan);

struct RunCallbacks {
  std::function<void(const PlannedCell&, size_t index, size_t total)> on_start;
  std::function<void(const Cell&, size_t index, size_t total)> on_done;
};

std::vector<Cell> run_cells(const Registry& registry, const RunPlan& plan,
                            const RunCallbacks& callbacks = {});

}  // namespace tc
