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

namespace tc {

struct PlannedCell;
struct RunPlan;

// RANK and WORLD_SIZE are in the environment (torchrun, or a launcher that sets them as it does).
bool under_torchrun();
int torchrun_rank();  // RANK, 0 when unset

// Outside torchrun: runs the cell's check as ranks under torchrun and returns rank 0's result
// (metrics.device_label names the world, e.g. "cpu×2"). Throws SkipCell / HarnessError as a
// check does.
CheckResult launch_multi_process_cell(const PlannedCell& planned, const RunPlan& plan, const CheckContext& ctx);

}  // namespace tc
