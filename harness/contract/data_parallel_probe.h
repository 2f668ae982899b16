// How a check trains a recipe data-parallel over torchrun's ranks the way it ships (sharded with
// FSDP, or replicated with DDP) and reads what each rank holds. FSDP (torch.distributed.fsdp's
// fully_shard) has no counterpart in LibTorch's C++ frontend: a Python recipe implements this probe
// through the bridge (python/bridge/python_run_data_parallel.cpp, RunOptions.data_parallel in
// python/torchconform/run.py); a C++ recipe does not, and the check `fsdp` skips its cells, naming
// this interface. Found with dynamic_cast next to tc::Run.
//
// Every call marked "collective" must be made by every rank, in the same order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/contract/run.h"

namespace tc {

// Bytes of one part of the training state on one rank.
struct ShardAccount {
  int64_t local_bytes = 0;  // what this rank holds (a sharded tensor: its shard)
  int64_t full_bytes = 0;   // the same tensors whole
  int64_t row_bytes = 0;    // one dim-0 row of each tensor, summed: the most an uneven split adds
  int64_t tensors = 0;
};

// What one rank holds of the training state after a step.
struct ShardBytes {
  ShardAccount parameters;          // the recipe's parameters
  ShardAccount gradients;           // their gradients, where set
  ShardAccount optimizer_state;     // the optimizer's state tensors of more than one element
  ShardAccount foreign_parameters;  // tensors the optimizer updates that are not the recipe's parameters
  int64_t scalars = 0;              // 0-dim optimizer state (e.g. a step count per parameter)
  std::vector<std::string> unsharded;  // parameters held whole (not sharded) on this rank
};

class DataParallelProbe {
 public:
  virtual ~DataParallelProbe() = default;
  // Collective: joins torchrun's process group (made from the environment when the process has
  // none: Gloo for "cpu", NCCL for "cuda"); {rank, world size}.
  virtual std::pair<int, int> join_process_group(const std::string& device) = 0;
  // Before setup(): train sharded ("fsdp"), replicated ("ddp"), or in one process ("", the default).
  virtual void set_data_parallel(const std::string& mode) = 0;
  // Collective: every parameter whole (shards gathered), by name, on the CPU.
  virtual NamedTensors full_parameters() = 0;
  // What this rank holds now.
  virtual ShardBytes shard_bytes() = 0;
  // Collective: every rank's `text`, in rank order.
  virtual std::vector<std::string> all_gather_text(const std::string& text) = 0;
  virtual void barrier() = 0;  // collective
  // Collective, last: destroys the process group join_process_group made (none it found), so that
  // nothing of it outlives the check (its Python objects must not be torn down at exit).
  virtual void leave_process_group() = 0;
};

}  // namespace tc
