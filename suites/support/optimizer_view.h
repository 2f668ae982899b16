// The recipe's optimizer as the checks see it (harness/contract/state_probes.h's OptimizerProbe):
// the recipe's own probe when it implements one (a Python recipe), else a view of
// tc::Run::optimizer(). Throws ProbeNotProvided (the cell is skipped) when it has neither.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/contract/state_probes.h"

namespace tc {

// The view lives no longer than `run`.
std::shared_ptr<OptimizerProbe> optimizer_of(Run& run);

// Each group's learning rate, in order.
std::vector<double> learning_rates(OptimizerProbe& o);

// "" when the recipe's update is linear in its gradients (SGD with momentum and weight decay: a
// bound on the gradients carries to the update), else the optimizer's name. Adaptive optimizers
// normalise each element (Adam's m / sqrt(v)): an element whose gradient is near zero moves by about
// lr whatever its rounding noise, so their update is no measure of how closely two computations of
// the gradient agree; checks that compare two ways of computing a step judge the gradient instead
// (amp, torch_compile). No optimizer probe: "" (the update is judged).
std::string element_normalising_optimizer(Run& run);

}  // namespace tc
