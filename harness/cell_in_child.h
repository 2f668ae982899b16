// One cell of `run` in a child process of this program, its report read back: the one way the
// runner hands a cell (or part of one) to another process. Two callers:
//  - a part of a cell's check in a fresh process (CheckContext::in_fresh_process): the runner starts
//    `<executable> run --check C --recipe R --device D --seed S --part P --json F`, where the check
//    sees ctx.part == P and returns what it measured as its metrics. What a process fixes once (a
//    value read from std::random_device into a static, an address-derived key, a per-process salt)
//    is the same for two runs in one process and differs between processes. Killed after
//    TORCHCONFORM_FRESH_PROCESS_TIMEOUT_S (default 300).
//  - a multi-process cell (harness/multi_process.h): the same `run` restricted to one cell, started
//    by torchrun on every rank; rank 0 writes the report.
// The child is started through harness/child_process.h. No torch here.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/child_process.h"
#include "harness/contract/record.h"
#include "harness/contract/registry.h"

namespace tc {

struct CellChild {
  std::vector<std::string> launcher;  // what starts the binary (torchrun and its flags), or empty
  std::string executable;             // this program
  std::vector<std::string> extra;     // more flags of `run` (--part P, --work-dir D, ...)
  std::chrono::seconds timeout{300};
  std::string what;                   // names the child in errors ("torchrun (cpu×2)")
  // launcher[0] is torchrun: run it as a fork of this process, in the interpreter it started
  // (harness/contract/python_loader.h: PythonTorchrun), where it has one and one thread; by exec
  // otherwise. torch is imported there already (about 1.7 s of a torchrun's start here).
  bool torchrun_in_fork = false;
};

struct CellFromChild {
  Cell cell;            // the report's cell for ctx's check and recipe
  child::Result exit;   // how the child ended
  std::string log_tail; // the end of its output (the scratch directory is gone by then)
};

// Runs ctx's cell (check, recipe, device, seed, --quick, --sweep, each --python spec) in a child and returns the cell
// its report holds. Throws HarnessError, with the child's output's tail, when it timed out, wrote no
// readable report, or reported no such cell; the cell's own verdict is the caller's to read.
CellFromChild run_cell_in_child(const CellChild& spec, const CheckContext& ctx);

// Runs `part` of ctx's cell in a fresh process of `executable` (this program) and returns the
// metrics the check returned there. Throws HarnessError when no result came back, SkipCell when the
// child skipped the cell, std::runtime_error with the child's evidence when the check failed there
// (the recipe failing under test).
nlohmann::json run_part_in_fresh_process(const std::string& executable, const CheckContext& ctx,
                                         const std::string& part);

}  // namespace tc
