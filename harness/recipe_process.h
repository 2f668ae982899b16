// A recipe's cells in a process of their own: the code under test (a user's recipe, C++ or Python)
// runs apart from the process that judges it and writes the report, so nothing the recipe does
// (exit with any status, crash, hang, change the process's state) forges a verdict or ends the run.
//
// The runner (isolated, the default of `run`) hands each (recipe, device) group of cells here. The
// recipe's process runs the same plan restricted to the group (stream_cells below): it appends each
// finished cell to a file F as a JSON line and keeps where it is in a mapped page B
// (harness/util/breadcrumb.h). It is a fork of this process (no exec: what this process loaded, the
// LibTorch libraries, an embedded Python with torch and the recipes' modules, is there already)
// while this process has one thread (harness/util/forking.h); otherwise, or with
// RunPlan::fork_recipe_processes off, `<this program> run --in-process --recipe R --check c1,c2,...
// --device D --cell-stream F --breadcrumb B ...` started by exec, which loads everything again
// (0.4 s for the C++ binary here, 2.75 s for a Python recipe's interpreter and torch). It watches
// the child:
//  - a cell that is not finished by its deadline (the check's Timeout, or `run --cell-timeout`),
//    counted from where the cell starts (the first: from the end of the process's start-up, when it
//    opens its breadcrumb file), is `error` "killed after N s during <check>, in <method>": the
//    process group is killed, and the recipe's cells after it are `error` too (not started again: a
//    recipe that hangs once would hang each time, a deadline each);
//  - a process that has not reached its first cell within RunPlan::startup_timeout_s is stopped the
//    same way, its first cell `error` "killed after N s still starting, before its first cell";
//  - a process that ends before its cells are finished (any exit status, a signal) leaves the cell
//    it was in `error` "the recipe's process exited with status 0 during <check>, in <method>", with
//    the end of its output; the cells after it run in a new process.
// No torch here.
#pragma once

#include <functional>
#include <vector>

#include "harness/contract/record.h"
#include "harness/runner.h"

namespace tc {

// Runs `group` (cells of one recipe on one device, in plan order) in a process of the recipe's own,
// calling on_done for each cell as it is known. Never throws for what the child does.
std::vector<Cell> run_group_in_recipe_process(const Registry& registry, const std::vector<PlannedCell>& group,
                                              const RunPlan& plan, const std::function<void(const Cell&)>& on_done);

// What a recipe's process does (`run --cell-stream F --breadcrumb B`, or the forked child): runs
// the plan's cells in this process, appending each finished cell to plan.cell_stream as one JSON
// line as soon as it is known (the judging process reads them as they come, and after this process
// ends however it ends), and keeping its place in `breadcrumb_file` ("" for none).
void stream_cells(const Registry& registry, const RunPlan& plan, const std::string& breadcrumb_file);

// The evidence of a cell the recipe's process did not finish (pure): `how` is what ended it
// ("exited with status 0", "was killed after 20 s (the cell's deadline ...)"), `where` the
// breadcrumb ("" when none was written), `log_tail` the end of its output, `then` what follows for
// the recipe's other cells ("" for nothing to say).
std::string unfinished_cell_evidence(const std::string& how, const std::string& check, const std::string& where,
                                     const std::string& log_tail, const std::string& then);

}  // namespace tc
