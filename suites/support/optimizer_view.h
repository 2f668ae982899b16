// The recipe's optimizer as the checks see it (harness/contract/state_probes.h's OptimizerProbe):
// the recipe's own probe when it implements one (a Python recipe), else a view of
// tc::Run::optimizer(). Throws ProbeNotProvided (the cell is skipped) when it has neither.
#pragma once

#include <memory>
#include <vector>

#include "harness/contract/state_probes.h"

namespace tc {

// The view lives no longer than `run`.
std::shared_ptr<OptimizerProbe> optimizer_of(Run& run);

// Each group's learning rate, in order.
std::vector<double> learning_rates(OptimizerProbe& o);

}  // namespace tc
