// Multi-process cells, a runner feature: a check registered with ->MultiProcess(n) implements
// the worker only (what one rank does; rank 0 returns the cell's result). Outside torchrun the
// runner launches torchrun on the torchconform binary for each such cell (`run` restricted to that
// one cell, with --work-dir shared by the ranks) and takes rank 0's cell from the report it writes;
// under torchrun (RANK and WORLD_SIZE set) `run` runs only such checks, each rank its share, and only
// rank 0 writes reports. `run --no-distributed` leaves them out. No torch here.
//
// World size: on CUDA one rank per GPU; on the CPU the check's declared ranks
// (TORCHCONFORM_DIST_NPROC overrides). The launch is killed after TORCHCONFORM_DIST_LAUNCH_TIMEOUT_S
// (default 300).
#pragma once

#include <string>

#include "harness/contract/registry.h"
#include "harness/run_plan.h"

namespace tc {

// RANK and WORLD_SIZE are in the environment (torchrun, or a launcher that sets them as it does).
bool under_torchrun();
int torchrun_rank();  // RANK, 0 when unset

// The world of a multi-process check's cell on `device`: under torchrun this rank's (RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE); outside it the world the runner will launch (one rank per GPU on
// CUDA, else the check's ranks or TORCHCONFORM_DIST_NPROC), as rank 0 sees it.
World world_for(const CheckInfo& check, const std::string& device);

// Outside torchrun: runs the cell's check as ranks under torchrun (ctx.world says how many) and
// returns rank 0's result. Throws SkipCell / HarnessError as a check does.
CheckResult launch_multi_process_cell(const PlannedCell& planned, const RunPlan& plan, const CheckContext& ctx);

}  // namespace tc
