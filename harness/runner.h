// Crosses check x recipe x device into cells and runs them. Makes plain records; formats nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/contract/record.h"
#include "harness/contract/registry.h"

namespace tc {

struct DeviceSlot {
  std::string name;        // "cpu", "cuda"
  bool available = true;
  std::string reason;      // why not available (cells on it are skipped with this reason)
};

struct RunPlan {
  std::vector<std::string> checks;   // empty: all
  std::vector<std::string> recipes;  // empty: all
  std::vector<DeviceSlot> devices;
  int64_t seed = 0;
  bool quick = false;
  bool sweep = false;  // `run --sweep` (CheckContext::sweep)
  bool cuda_present = false;  // the machine has a usable CUDA device (whatever --device says)
  // Multi-process checks (->MultiProcess(n), harness/multi_process.h): outside torchrun the runner
  // launches torchrun on `executable` for each of their cells; as one of torchrun's workers
  // (`worker`) it runs the check in this process, with `work_dir` shared by every rank.
  std::string executable;
  bool worker = false;
  std::string work_dir;
  // Not empty: this process runs only this part of one cell's check (CheckContext::part), started
  // by CheckContext::in_fresh_process (harness/cell_in_child.h) of another.
  std::string part;
  // The `run --python` specs loaded in this process (absolute files): CheckContext::python_specs.
  std::vector<std::string> python_specs;
  // Each recipe's cells run in a process of their own (harness/recipe_process.h), this one judging
  // and reporting: what `run` does unless --in-process (or it is itself such a process, a part or
  // a torchrun worker).
  bool isolate = false;
  // How a recipe's process starts: a fork of this one (no exec: the libraries, the interpreter and
  // the recipes' modules are loaded already) while this process has one thread, else by exec of
  // `executable` (fork_recipe_processes false: always by exec; `run --recipe-processes exec`).
  bool fork_recipe_processes = true;
  // A cell's deadline in its recipe's process, in seconds; 0: the check's own (CheckInfo::timeout_s).
  int cell_timeout_s = 0;
  // Not empty: this process is a recipe's process (`run --cell-stream FILE`): each finished cell is
  // appended to FILE as one JSON line, for the process that started it.
  std::string cell_stream;
};

struct PlannedCell {
  const CheckInfo* check;
  const RecipeInfo* recipe;
  DeviceSlot device;
};

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
