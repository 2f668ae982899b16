// Checks that run as several processes under torchrun (the `distributed` check), and whether this
// process is one of torchrun's workers. No torch here.
//
// `torchconform run` under torchrun (RANK and WORLD_SIZE set) runs only these checks, each rank
// its share, and only rank 0 writes reports; outside torchrun such a check launches torchrun
// itself. `run --no-distributed` leaves them out.
#pragma once

#include <string>

#include "harness/registry.h"  // TC_CONCAT

namespace tc {

void mark_multi_process_check(const std::string& check);
bool is_multi_process_check(const std::string& check);

// RANK and WORLD_SIZE are in the environment (torchrun, or a launcher that sets them as it does).
bool under_torchrun();
int torchrun_rank();  // RANK, 0 when unset

}  // namespace tc

// Registers `check` (also registered with TC_REGISTER_CHECK) as a multi-process check.
#define TC_MARK_MULTI_PROCESS(check)                                                   \
  static const bool TC_CONCAT(tc_multi_process_, __LINE__) =                           \
      (::tc::mark_multi_process_check(check), true)
