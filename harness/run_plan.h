// What a run is asked to do (RunPlan) and the cells it crosses into (PlannedCell): plain records
// that the runner (harness/runner.h) shares with the device resolution (harness/devices.h) and the
// torchrun launch of a cell (harness/multi_process.h), so that neither includes the runner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  bool no_sweep = false;  // `run --no-sweep` (CheckContext::no_sweep)
  // `run --judged-only`: a variant gets cells only on the checks it targets (its cells on the other
  // checks are recorded, never judged: the catalogue's "recorded" cells), correct recipes on every check.
  bool judged_only = false;
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
  // The bound on a recipe process's start-up, in seconds: from its start to its first cell (an exec
  // loads this program, the interpreter, torch and the recipe's module again). It is not part of any
  // cell's deadline: the deadline counts from where the cell starts.
  int startup_timeout_s = 120;
  // Not empty: this process is a recipe's process (`run --cell-stream FILE`): each finished cell is
  // appended to FILE as one JSON line, for the process that started it.
  std::string cell_stream;
};

struct PlannedCell {
  const CheckInfo* check;
  const RecipeInfo* recipe;
  DeviceSlot device;
};

}  // namespace tc
